#pragma once
// A scripted perftest 6.06 peer for rig-perf's model tests (perftest_peer_test.cpp: the bytes and
// the order of a truthful peer; lying_peer_test.cpp: a peer that lies). The peer's TCP side is
// written from upstream's C (write_bw.c, write_lat.c, send_bw.c, perftest_communication.c at tag
// v4.5-0.17) with perftest's own formats (sprintf KEY_PRINT_FMT_GID, htonl, hton_long), not with
// rig-perf's encoders; its data path runs Rig's API on a second model function, so the RDMA side
// is real. rig-perf runs perf::run in a thread on the first function (bench).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <expected>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <catch2/catch.hpp>

#include "test/model/perf/loopback.hpp"
#include "test/model/qp_api/served_nics.hpp"
#include "tools/rig-perf/exchange.hpp"
#include "tools/rig-perf/loops.hpp"
#include "tools/rig-perf/runner.hpp"

namespace rig::test::perftest {

using namespace std::chrono_literals;
namespace perf = rig::perf;

inline constexpr auto bound = 20s;  // any one step of the script

inline std::string printable(std::string_view b) {
    std::string s;
    for (char c : b) {
        if (c >= 0x20 && c < 0x7f) {
            s += c;
        } else {
            s += "\\x";
            s += "0123456789abcdef"[static_cast<std::uint8_t>(c) >> 4];
            s += "0123456789abcdef"[static_cast<std::uint8_t>(c) & 0xf];
        }
    }
    return s;
}

// perftest's side of the socket: blocking reads and writes of fixed sizes, each bounded.
class perftest_socket {
public:
    explicit perftest_socket(int fd) : _fd(fd) {}
    perftest_socket(const perftest_socket&) = delete;
    ~perftest_socket() { ::close(_fd); }
    void write(std::string_view b) const { REQUIRE(::send(_fd, b.data(), b.size(), MSG_NOSIGNAL) == ssize_t(b.size())); }
    // read(fd, msg, n): exactly n bytes, or what came before the peer closed.
    std::string read(std::size_t n, std::string_view what) const {
        std::string b;
        const auto by = std::chrono::steady_clock::now() + bound;
        while (b.size() < n) {
            pollfd p{_fd, POLLIN, 0};
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(by - std::chrono::steady_clock::now());
            INFO("waiting for " << what << " from rig-perf");
            REQUIRE(::poll(&p, 1, static_cast<int>(std::max(left.count(), 0L))) == 1);
            char c[256];
            const ssize_t got = ::recv(_fd, c, std::min(sizeof c, n - b.size()), 0);
            if (got <= 0) {
                break;
            }
            b.append(c, static_cast<std::size_t>(got));
        }
        return b;
    }
    void expect(std::string_view want, std::string_view what) const {
        const std::string got = read(want.size(), what);
        INFO(what << ": rig-perf sent '" << printable(got) << "', perftest sends '" << printable(want) << "'");
        REQUIRE(got == want);
    }
    // The peer closed with nothing more sent.
    void expect_closed(std::string_view after) const {
        const std::string more = read(1, "the end");
        INFO("after " << after << " rig-perf sent '" << printable(more) << "' (perftest closes)");
        REQUIRE(more.empty());
    }
    int fd() const { return _fd; }

private:
    int _fd;
};

// ---- perftest's encodings, as its C writes them

inline std::string version_msg() { return std::string("6.06") + std::string(12, '\0'); }  // char version[16]
inline std::string be32(std::uint32_t v) {
    const std::uint32_t n = htonl(v);
    return std::string(reinterpret_cast<const char*>(&n), 4);
}
inline std::string be64(std::uint64_t v) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) {
        s[static_cast<std::size_t>(i)] = static_cast<char>(v >> (56 - 8 * i));
    }
    return s;
}
inline std::string be_double(double v) { return be64(std::bit_cast<std::uint64_t>(v)); }
inline std::uint64_t from_be64(std::string_view s) {
    std::uint64_t v = 0;
    for (char c : s) {
        v = v << 8 | static_cast<std::uint8_t>(c);
    }
    return v;
}
// What perftest puts in a QP line's out_reads (pingpong_dest.out_reads = user_param->out_reads):
// 1 for every verb but READ and ATOMIC (check_link_and_mtu), the device's max_qp_rd_atom (16
// on ConnectX) for READ.
inline std::uint32_t out_reads_of(perf::test_kind k) {
    return k == perf::test_kind::read_bw || k == perf::test_kind::read_lat ? 16 : 1;
}

// ethernet_write_keys: sprintf(msg, KEY_PRINT_FMT_GID, ...); write(fd, msg, sizeof msg = 108)
inline std::string key_line(std::uint32_t out_reads, std::uint32_t qpn, std::uint32_t psn, std::uint32_t rkey,
                     std::uint64_t vaddr, const std::array<std::byte, 16>& g) {
    char msg[108] = {};
    auto b = [&](int i) { return static_cast<unsigned>(g[static_cast<std::size_t>(i)]); };
    std::snprintf(msg, sizeof msg,
                  "%04x:%04x:%06x:%06x:%08x:%016llx:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:"
                  "%02x:%02x:%02x:%08x:",
                  0u, out_reads, qpn, psn, rkey, static_cast<unsigned long long>(vaddr), b(0), b(1), b(2), b(3), b(4), b(5),
                  b(6), b(7), b(8), b(9), b(10), b(11), b(12), b(13), b(14), b(15), 0u);
    return std::string(msg, sizeof msg);
}

// The peer: a queue pair and a region on function 1, speaking perftest from `fd`.
struct perftest_peer {
    perf::test_kind kind;
    bool client;
    perftest_socket sock;
    std::unique_ptr<rig::nic> nic;
    rig::region buf;
    rig::queue_pair qp;
    std::uint64_t half;
    std::uint32_t mtu = 1024;  // what its queue pair connects at: the smaller of both offers
    std::string mine;    // our 108-byte line
    std::string theirs;  // rig-perf's first line: every later H0 must be the same bytes
    std::optional<perf::lane> lane;

    perftest_peer(perf::test_kind k, bool c, int fd, served_function& f, std::uint64_t h)
        : kind(k), client(c), sock(fd), nic(f.open()), buf(value(nic->allocate(2 * h, rig::access::remote))),
          qp(value(nic->make_qp())), half(h) {
        const rig::endpoint e = qp.local();
        mine = key_line(out_reads_of(kind), e.qp, e.psn, buf.key(), buf.address() + half, e.gid);
    }
    // ctx_xchg_data / ctx_hand_shake: the client writes, then reads; the server reads, then writes.
    void xchg(std::string_view out, std::string_view want, std::string_view what) const {
        if (client) {
            sock.write(out);
            sock.expect(want, what);
        } else {
            sock.expect(want, what);
            sock.write(out);
        }
    }
    std::string xchg_read(std::string_view out, std::size_t n, std::string_view what) const {
        if (client) {
            sock.write(out);
            return sock.read(n, what);
        }
        std::string got = sock.read(n, what);
        sock.write(out);
        return got;
    }
    // P: exchange_versions, check_sys_data, check_mtu (we offer 1024, "3"; rig-perf "5", 4096: the
    // path MTU its port's Ethernet MTU of 9000 carries, nic::path_mtu; both then use the smaller).
    void preamble() const {
        xchg(version_msg(), version_msg(), "the version");
        xchg(be32(4096), be32(4096), "cycle_buffer");
        xchg(be32(64), be32(64), "cache_line_size");
        xchg(std::string("3\0", 2), std::string("5\0", 2), "the MTU");
    }
    // The first line rig-perf sends: 108 bytes in KEY_PRINT_FMT_GID, re-printed identically.
    void first_line() {
        theirs = xchg_read(mine, 108, "QP 0's line");
        unsigned lid = 0, reads = 0, qpn = 0, psn = 0, rkey = 0, srqn = 0;
        unsigned long long vaddr = 0;
        unsigned g[16] = {};
        REQUIRE(std::sscanf(theirs.c_str(),
                            "%04x:%04x:%06x:%06x:%08x:%016llx:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:"
                            "%02x:%02x:%02x:%02x:%02x:%08x:",
                            &lid, &reads, &qpn, &psn, &rkey, &vaddr, &g[0], &g[1], &g[2], &g[3], &g[4], &g[5], &g[6],
                            &g[7], &g[8], &g[9], &g[10], &g[11], &g[12], &g[13], &g[14], &g[15], &srqn) == 23);
        std::array<std::byte, 16> gid{};
        for (std::size_t i = 0; i < 16; ++i) {
            gid[i] = static_cast<std::byte>(g[i]);
        }
        CHECK(reads == out_reads_of(kind));  // perftest's value for this test, not 0
        REQUIRE(key_line(reads, qpn, psn, rkey, vaddr, gid) == theirs);
        const auto mac = perf::mac_from_gid(gid);
        REQUIRE(mac.has_value());
        // at the smaller MTU offered (we offer 1024, rig-perf its NIC's 4096 or its -m), as
        // perftest's QP does: IB wants one PMTU on both sides (a FIRST or MIDDLE packet carries
        // exactly PMTU bytes)
        rig::test::ok(qp.connect(rig::endpoint{qpn, psn, gid, *mac}, mtu));
        lane = perf::lane{&qp, buf, rig::remote{vaddr, rkey}, 0};
    }
    void h0(std::string_view what) const { xchg(mine, theirs, what); }
    // ctx_close_connection (6.06): the handshake, "done\0", close.
    void close(std::string_view what) const {
        h0(what);
        sock.write(std::string_view("done", 5));
        ::shutdown(sock.fd(), SHUT_WR);  // close(sockfd): our FIN
        sock.expect(std::string_view("done", 5), "\"done\" after the closing handshake");
        sock.expect_closed("\"done\"");
    }
    // write_bw's server after its first line, against a client running one size (write_bw.c):
    // the handshakes after connect, after RTR and after the run, the client's BW report (its five
    // 8-byte fields, returned as sent: size, iterations, then the bits of bw_peak, bw_avg,
    // msgRate), then the close.
    std::array<std::uint64_t, 5> serve_one_write_bw_size() const {
        h0("QP 0's line after connect");
        h0("the handshake after RTR");
        h0("the client's handshake after the run");
        std::array<std::uint64_t, 5> report{};
        const char* fields[] = {"the report's size", "the report's iterations", "bw_peak", "bw_avg", "msgRate"};
        for (std::size_t i = 0; i < report.size(); ++i) {
            report[i] = from_be64(xchg_read(be64(0), 8, fields[i]));
        }
        close("the closing handshake");
        return report;
    }
    // write_bw's client after its first line, against a server that only waits (write_bw.c): the
    // same three handshakes, its report sent field by field (each answered with zeros: perftest
    // never fills the passive side's report), then the close.
    void report_one_write_bw_size(std::uint64_t size, std::uint64_t iters, double peak, double avg,
                                  double rate) const {
        h0("QP 0's line after connect");
        h0("the handshake after RTR");
        h0("the server's handshake after the run");
        for (const auto& f : {be64(size), be64(iters), be_double(peak), be_double(avg), be_double(rate)}) {
            CHECK(from_be64(xchg_read(f, 8, "the server's report field")) == 0);
        }
        close("the closing handshake");
    }
    perf::loop_settings settings(std::uint64_t size, std::uint64_t iters) const {
        perf::loop_settings s;
        s.size = size;
        s.half = half;
        s.iterations = iters;
        s.tx_depth = 16;
        s.stall = 10s;
        return s;
    }
};

// rig-perf on function 0 in a thread; its printout kept.
struct rig_perf_side {
    perf::options o;
    char* text = nullptr;
    std::size_t text_size = 0;
    std::FILE* out = ::open_memstream(&text, &text_size);
    std::expected<perf::run_report, std::string> result = std::unexpected("not run");
    std::mutex lock;
    std::condition_variable ended;
    bool done = false;
    std::thread t;

    void start() {
        t = std::thread([this] {
            auto r = perf::run(o, out);
            std::lock_guard g(lock);
            result = std::move(r);
            done = true;
            ended.notify_all();
        });
    }
    // Whether the run has ended within `wait`. If not, the thread still runs: the peer's close
    // (the bench's peer goes first) ends it before the destructor joins.
    bool ended_within(std::chrono::milliseconds wait) {
        std::unique_lock g(lock);
        return ended.wait_for(g, wait, [this] { return done; });
    }
    std::string finish() {
        if (t.joinable()) {
            t.join();
        }
        std::fflush(out);
        return std::string(text, text_size);
    }
    // After the peer (declared after this): its socket closed, rig-perf's run ends at once.
    ~rig_perf_side() {
        if (t.joinable()) {
            t.join();
        }
        std::fclose(out);
        std::free(text);
    }
};

// A listening socket on a free loopback port (perftest's server, or a port for rig-perf's).
inline int listen_socket(std::uint16_t& port) { return rig::test::listen_loopback(port); }

inline int accept_within(int listener) {
    pollfd p{listener, POLLIN, 0};
    REQUIRE(::poll(&p, 1, 20000) == 1);
    const int fd = ::accept(listener, nullptr, nullptr);
    ::close(listener);
    REQUIRE(fd >= 0);
    return fd;
}

inline int connect_retrying(std::uint16_t port) {
    const int fd = rig::test::connect_loopback(port, bound);
    if (fd < 0) {
        FAIL("rig-perf's server did not listen on port " << port);
    }
    return fd;
}

// Two functions of the family under test on one wire; rig-perf on 0 with the options `tweak`
// sets, the scripted peer on 1 (declared last: destroyed first, which ends a rig-perf run that a
// failed step left waiting).
struct bench {
    rig::sim::roce::wire w;
    served_function m0{0, &w};
    served_function m1{1, &w};
    rig_perf_side rp;
    std::optional<perftest_peer> peer;

    template <class Tweak>
    bench(perf::test_kind k, bool rig_perf_is_client, std::uint64_t half, Tweak tweak) {
        rp.o.kind = k;
        rp.o.device = m0.where();
        rp.o.iterations = 20;
        rp.o.tx_depth = is_latency(k) ? 1 : 16;
        rp.o.size = 2;
        rp.o.exchange_timeout = 10000ms;
        tweak(rp.o);
        std::uint16_t port = 0;
        if (rig_perf_is_client) {
            const int listener = listen_socket(port);
            rp.o.server = "127.0.0.1";
            rp.o.port = port;
            rp.start();
            peer.emplace(k, false, accept_within(listener), m1, half);
        } else {
            ::close(listen_socket(port));  // a free port for rig-perf's server
            rp.o.port = port;
            rp.start();
            peer.emplace(k, true, connect_retrying(port), m1, half);
        }
    }
};


}  // namespace rig::test::perftest
