// Fuzzes rig-perf's side of perftest's out-of-band exchange (tools/rig-perf/exchange.hpp): the
// bytes a perftest peer sends, read by the real channel over a loopback TCP connection, through
// the exchanges rig-perf's client runs in order (runner.cpp): exchange_setup (version, page size,
// cache line, MTU), one exchange_qp per queue pair (perftest's KEY_PRINT_FMT_GID line, also the
// handshake of close_connection), exchange_bw_report. A later perftest's binary parameter
// negotiation, or any other stream, is just bytes here: it must be refused by name.
//
// Input: byte 0 picks the plan (bits 0-1: 1-4 queue pairs; bit 2: a BW report follows), the rest
// is the peer's whole stream, written before rig-perf reads and then ended (a FIN), so no step
// waits on a deadline: a short stream is "closed", not a timeout.
// Oracle: a refusal names what was wrong (non-empty, and says which message); a QP line taken is
// the line encode_qp writes for it, hex digits in either case; a version taken is finite and at
// least 5.70; an MTU taken is 1..5 and no more than ours; BW figures taken are finite and >= 0.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test/fuzz/harness.hpp"
#include "tools/rig-perf/exchange.hpp"

namespace {

using namespace rig::perf;
using rig::fuzz::require;
constexpr auto wait = std::chrono::milliseconds(2000);
constexpr int our_mtu = 3;   // IBV_MTU_1024

// One listening socket on 127.0.0.1 for the whole run; the harness is the peer that accepts.
struct listener {
    int fd = -1;
    std::uint16_t port = 0;
    listener() {
        fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t n = sizeof a;
        require(fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), n) == 0 && ::listen(fd, 16) == 0 &&
                    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) == 0,
                "a loopback listener for the scripted peer");
        port = ntohs(a.sin_port);
    }
};

bool equal_ignoring_case(std::span<const std::byte> a, std::span<const std::byte> b) {
    return std::ranges::equal(a, b, [](std::byte x, std::byte y) {
        return std::tolower(std::to_integer<int>(x)) == std::tolower(std::to_integer<int>(y));
    });
}

void check_refusal(const std::string& why) { require(!why.empty(), "a refusal names what is wrong"); }

// The QP lines and the BW report, after a setup that was taken.
void run_after_setup(channel& c, unsigned qps, bool bw_report, std::span<const std::byte> stream, std::size_t at) {
    for (unsigned i = 0; i < qps; ++i) {
        qp_info mine;
        mine.qpn = 0x100 + i;
        auto theirs = exchange_qp(c, mine, wait);
        if (!theirs) {
            return check_refusal(theirs.error());
        }
        require(at + qp_line_bytes <= stream.size(), "a QP line taken was all in the stream");
        require(equal_ignoring_case(encode_qp(*theirs), stream.subspan(at, qp_line_bytes)),
                "a QP line taken is the line encode_qp writes for it");
        at += qp_line_bytes;
    }
    if (bw_report) {
        auto r = exchange_bw_report(c, bw_report_wire{}, wait);
        if (!r) {
            return check_refusal(r.error());
        }
        for (double v : {r->bw_peak, r->bw_avg, r->msg_rate}) {
            require(std::isfinite(v) && v >= 0, "a BW figure taken is finite and not negative");
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const listener peer_side;
    if (size == 0) {
        return 0;
    }
    const unsigned qps = 1 + (data[0] & 3u);
    const bool bw_report = (data[0] & 4u) != 0;
    const auto stream = rig::fuzz::bytes_of(data + 1, size - 1);

    auto c = channel::connect("127.0.0.1", peer_side.port, wait);
    require(c.has_value(), "rig-perf connects to the scripted peer");
    const int peer = ::accept4(peer_side.fd, nullptr, nullptr, SOCK_CLOEXEC);
    require(peer >= 0, "the scripted peer accepts");
    // the whole stream, then a FIN: it fits the socket's buffer (libFuzzer's inputs stay < 4 KiB)
    const auto sent = ::send(peer, stream.data(), stream.size(), MSG_NOSIGNAL);
    require(sent == static_cast<ssize_t>(stream.size()) && ::shutdown(peer, SHUT_WR) == 0, "the peer's stream is sent");

    auto setup = exchange_setup(*c, our_mtu, wait);
    if (!setup) {
        check_refusal(setup.error());
    } else {
        require(std::isfinite(setup->peer_version) && setup->peer_version >= oldest_peer_version,
                "a version taken is a finite 5.70 or later");
        require(setup->mtu >= 1 && setup->mtu <= our_mtu, "the MTU taken is an ibv_mtu value, no more than ours");
        require(setup->page_size >= page_size && setup->cache_line >= cache_line, "each side keeps the larger size");
        run_after_setup(*c, qps, bw_report, stream, version_bytes + 4 + 4 + mtu_bytes);
    }
    c->close();
    ::close(peer);
    return 0;
}
