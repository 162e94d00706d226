// rig-perf against a scripted perftest 6.06 peer (tools/rig-perf/protocol.hpp): the peer's TCP
// side is written here from upstream's C (write_bw.c, write_lat.c, send_bw.c,
// perftest_communication.c at tag v4.5-0.17), byte by byte with perftest's own formats
// (sprintf KEY_PRINT_FMT_GID, htonl, hton_long/hton_double), not with rig-perf's encoders; at
// each step it checks that rig-perf sent exactly what a perftest would, and that it sends
// nothing more (the next read would take the wrong bytes, and the last one must be the close).
// Its data path runs Rig's API on a second model function with rig-perf's own loops, so the
// RDMA side is real: rig-perf runs its loops in a thread on the first function.
// The functions are of the family under test (RIG_TEST_FAMILY=mlx5|bnxt|mixed, served_nics.hpp;
// meson runs the suite once per family): mixed puts rig-perf on an mlx5 function and the peer on
// a bnxt one.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "test/model/perf/loopback.hpp"
#include "test/model/qp_api/served_nics.hpp"
#include "tools/rig-perf/exchange.hpp"
#include "tools/rig-perf/loops.hpp"
#include "tools/rig-perf/runner.hpp"

namespace {

using namespace std::chrono_literals;
using namespace std::string_view_literals;
namespace perf = rig::perf;
using rig::test::family;
using rig::test::served_function;
using rig::test::quick_bnxt_model;
using rig::test::quick_model;
using rig::test::value;

constexpr auto bound = 20s;  // any one step of the script

std::string printable(std::string_view b) {
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

std::string version_msg() { return std::string("6.06") + std::string(12, '\0'); }  // char version[16]
std::string be32(std::uint32_t v) {
    const std::uint32_t n = htonl(v);
    return std::string(reinterpret_cast<const char*>(&n), 4);
}
std::string be64(std::uint64_t v) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) {
        s[static_cast<std::size_t>(i)] = static_cast<char>(v >> (56 - 8 * i));
    }
    return s;
}
std::uint64_t from_be64(std::string_view s) {
    std::uint64_t v = 0;
    for (char c : s) {
        v = v << 8 | static_cast<std::uint8_t>(c);
    }
    return v;
}
// What perftest puts in a QP line's out_reads (pingpong_dest.out_reads = user_param->out_reads):
// 1 for every verb but READ and ATOMIC (check_link_and_mtu), the device's max_qp_rd_atom (16
// on ConnectX) for READ.
std::uint32_t out_reads_of(perf::test_kind k) {
    return k == perf::test_kind::read_bw || k == perf::test_kind::read_lat ? 16 : 1;
}

// ethernet_write_keys: sprintf(msg, KEY_PRINT_FMT_GID, ...); write(fd, msg, sizeof msg = 108)
std::string key_line(std::uint32_t out_reads, std::uint32_t qpn, std::uint32_t psn, std::uint32_t rkey,
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
    std::thread t;

    void start() {
        t = std::thread([this] { result = perf::run(o, out); });
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
int listen_socket(std::uint16_t& port) { return rig::test::listen_loopback(port); }

int accept_within(int listener) {
    pollfd p{listener, POLLIN, 0};
    REQUIRE(::poll(&p, 1, 20000) == 1);
    const int fd = ::accept(listener, nullptr, nullptr);
    ::close(listener);
    REQUIRE(fd >= 0);
    return fd;
}

int connect_retrying(std::uint16_t port) {
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

// A function of rig-perf's family (function 0's under test) whose port's Ethernet MTU is 1500,
// alone (no wire), served as served_function serves one.
struct served_1500 {
    rig::test::temp_socket sock;
    std::unique_ptr<rig::sim::mlx5::function_model> mlx5;
    std::unique_ptr<rig::sim::bnxt::function_model> bnxt;
    std::unique_ptr<rig::sim::vfio_user::server> srv;
    served_1500() {
        rig::sim::vfio_user::device* d = nullptr;
        if (rig::test::family_of(0) == family::mlx5) {
            auto o = quick_model(0);
            o.firmware.port_mtu = 1500;
            mlx5 = std::make_unique<rig::sim::mlx5::function_model>(o);
            d = mlx5.get();
        } else {
            auto o = quick_bnxt_model(0);
            o.firmware.mtu = 1500;
            bnxt = std::make_unique<rig::sim::bnxt::function_model>(o);
            d = bnxt.get();
        }
        auto s = rig::sim::vfio_user::server::create(sock.path(), *d);
        REQUIRE(s.has_value());
        srv = std::move(*s);
        mlx5 ? mlx5->attach(*srv) : bnxt->attach(*srv);
        srv->start();
    }
    ~served_1500() { srv.reset(); }   // the server before the model
    std::string where() const { return "vfio-user:" + sock.path(); }
};

// perftest's REPORT_FMT and REPORT_FMT_EXT (perftest_parameters.h; the latter for a Gb/s
// average under 0.1), then REPORT_EXT: how print_full_bw_report prints a report's row.
std::string report_row(std::uint64_t size, std::uint64_t iters, double peak, double avg, double rate, bool gbits) {
    char line[256];
    if (gbits && avg < 0.1) {
        std::snprintf(line, sizeof line, " %-7lu    %lu           %-7.6lf            %-7.6lf            %-7.6lf\n",
                      size, iters, peak, avg, rate);
    } else {
        std::snprintf(line, sizeof line, " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t     %-7.6lf\n", size,
                      iters, peak, avg, rate);
    }
    return line;
}

std::string be_double(double v) { return be64(std::bit_cast<std::uint64_t>(v)); }

auto all_to_64 = [](perf::options& o) {
    o.all_sizes = true;
    o.max_size = 64;
};

const std::vector<std::uint64_t> sizes_to_64{2, 4, 8, 16, 32, 64};

}  // namespace

TEST_CASE("perftest peer: write_bw -a, rig-perf client (no sync between sizes, one report, close)",
          "[model][perf]") {
    bench b(perf::test_kind::write_bw, true, 4096, all_to_64);
    auto& p = *b.peer;  // write_bw.c as the server: P Hq <connect> Hq H0, then H0 R C
    p.preamble();
    p.first_line();
    p.h0("QP 0's line after connect");
    p.h0("the handshake after RTR");
    p.h0("the client's handshake after all sizes");  // a per-size barrier would be read here
    const std::string r = p.xchg_read(be64(0), 8, "the report's size");
    CHECK(from_be64(r) == 64);  // the last size: no report per size
    const std::string iters = p.xchg_read(be64(0), 8, "the report's iterations");
    CHECK(from_be64(iters) == 20);
    for (const char* f : {"bw_peak", "bw_avg", "msgRate"}) {
        const std::string d = p.xchg_read(be64(0), 8, f);
        CHECK(std::bit_cast<double>(from_be64(d)) > 0);
    }
    p.close("the closing handshake");
    const std::string text = b.rp.finish();
    INFO(text);
    REQUIRE(b.rp.result.has_value());
    CHECK(b.rp.result->bw.size() == 6);
}

TEST_CASE("perftest peer: rig-perf connects at the smaller MTU offered, so 4 KiB writes reach a 1024-byte peer",
          "[model][perf]") {
    // The peer's queue pair takes packets of at most 1024 bytes (the model's responder, as a
    // NIC, refuses a longer one with an invalid-request NAK); rig-perf's NIC could send 4096.
    bench b(perf::test_kind::write_bw, true, 8192, [](perf::options& o) { o.size = 4096; });
    auto& p = *b.peer;
    p.preamble();
    p.first_line();
    p.h0("QP 0's line after connect");
    p.h0("the handshake after RTR");
    p.h0("the client's handshake after the run");
    CHECK(from_be64(p.xchg_read(be64(0), 8, "the report's size")) == 4096);
    CHECK(from_be64(p.xchg_read(be64(0), 8, "the report's iterations")) == 20);
    for (const char* f : {"bw_peak", "bw_avg", "msgRate"}) {
        CHECK(std::bit_cast<double>(from_be64(p.xchg_read(be64(0), 8, f))) > 0);
    }
    p.close("the closing handshake");
    const std::string text = b.rp.finish();
    INFO(text);
    REQUIRE(b.rp.result.has_value());
    CHECK(text.find(" Mtu             : 1024[B]") != std::string::npos);
    REQUIRE(b.rp.result->bw.size() == 1);
    CHECK(b.rp.result->bw[0].bytes == 4096);
}

TEST_CASE("perftest peer: -m 512 offers 512 and both sides use it; -m above the NIC's path MTU is refused",
          "[model][perf]") {
    {
        bench b(perf::test_kind::write_bw, true, 8192, [](perf::options& o) {
            o.size = 4096;
            o.mtu = 512;
        });
        auto& p = *b.peer;
        p.mtu = 512;
        p.xchg(version_msg(), version_msg(), "the version");
        p.xchg(be32(4096), be32(4096), "cycle_buffer");
        p.xchg(be32(64), be32(64), "cache_line_size");
        p.xchg(std::string("3\0", 2), std::string("2\0", 2), "the MTU");  // ibv_mtu 2: 512 bytes
        p.first_line();
        p.h0("QP 0's line after connect");
        p.h0("the handshake after RTR");
        p.h0("the client's handshake after the run");
        CHECK(from_be64(p.xchg_read(be64(0), 8, "the report's size")) == 4096);
        for (const char* f : {"iterations", "bw_peak", "bw_avg", "msgRate"}) {
            static_cast<void>(p.xchg_read(be64(0), 8, f));
        }
        p.close("the closing handshake");
        const std::string text = b.rp.finish();
        INFO(text);
        REQUIRE(b.rp.result.has_value());
        CHECK(text.find(" Mtu             : 512[B]") != std::string::npos);
    }
    // a NIC (of rig-perf's family) whose port carries 1024-byte RoCE packets (Ethernet MTU 1500):
    // -m 2048 is refused before any exchange, naming the flag and the NIC's path MTU
    served_1500 m;
    perf::options po;
    po.kind = perf::test_kind::write_bw;
    po.device = m.where();
    po.server = "127.0.0.1";
    po.port = 1;  // never reached
    po.mtu = 2048;
    auto r = perf::run(po, stdout);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error() == "-m 2048: above the path MTU of " + m.where() + " (1024, what its port's Ethernet MTU carries)");
}

TEST_CASE("perftest peer: write_bw -a, rig-perf server (passive until the client's report)", "[model][perf]") {
    bench b(perf::test_kind::write_bw, false, 4096, all_to_64);
    auto& p = *b.peer;
    p.preamble();
    p.first_line();
    p.h0("QP 0's line after connect");
    p.h0("the handshake after RTR");
    // write_bw.c RUN_ALL, client: every size with no message, then H0 R C.
    perf::bw_row last;
    for (std::uint64_t size : sizes_to_64) {
        std::vector<perf::lane> lanes{*p.lane};
        auto row = perf::run_bw_client(perf::test_kind::write_bw, lanes, p.settings(size, 20));
        REQUIRE(row.has_value());
        last = *row;
    }
    p.h0("the server's handshake after the run");
    for (const auto& f : {be64(last.bytes), be64(last.iterations), be64(std::bit_cast<std::uint64_t>(last.bw_peak_mib)),
                          be64(std::bit_cast<std::uint64_t>(last.bw_average_mib)),
                          be64(std::bit_cast<std::uint64_t>(last.msg_rate_mpps))}) {
        const std::string zeros = p.xchg_read(f, 8, "the server's report field");
        CHECK(from_be64(zeros) == 0);  // the server's my_bw_rep, never filled (perftest: stack garbage)
    }
    p.close("the closing handshake");
    const std::string text = b.rp.finish();
    INFO(text);
    REQUIRE(b.rp.result.has_value());
    REQUIRE(b.rp.result->bw.size() == 1);  // it prints the client's row, once
    CHECK(b.rp.result->bw[0].bytes == 64);
    CHECK(b.rp.result->bw[0].bw_average_mib == last.bw_average_mib);
    // print_full_bw_report(rem_bw_rep): the client's figures, exactly as the client printed them
    CHECK(text.find(report_row(64, last.iterations, last.bw_peak_mib, last.bw_average_mib, last.msg_rate_mpps, false)) !=
          std::string::npos);
}

// A perftest client with --report_gbits sends its figures in Gb/s (print_report_bw divides by
// the report format's factor before xchg_bw_reports): the server, run with the same flag,
// prints them as they came, with six decimals under 0.1 Gb/s (REPORT_FMT_EXT).
TEST_CASE("perftest peer: write_bw --report_gbits, rig-perf server prints the client's Gb/s report as sent",
          "[model][perf]") {
    // 0: 64 KiB; 1: 2 B at 0.04 Gb/s; 2: the client ran 64 KiB, the server was given 4 KiB
    // (perftest prints the client's report regardless; rig-perf too, with a warning on stderr)
    const int variant = GENERATE(0, 1, 2);
    INFO("variant " << variant);
    const bool small = variant == 1;
    const double peak = small ? 0.042350 : 94.24, avg = small ? 0.042185 : 92.28, rate = small ? 2.636533 : 0.176002;
    const std::uint64_t size = small ? 2 : 65536;
    bench b(perf::test_kind::write_bw, false, 65536, [&](perf::options& o) {
        o.report_gbits = true;
        o.size = variant == 2 ? 4096 : size;
    });
    auto& p = *b.peer;
    p.preamble();
    p.first_line();
    p.h0("QP 0's line after connect");
    p.h0("the handshake after RTR");
    // the client's run (its figures are the script's here: the server only waits), then H0 R C
    p.h0("the server's handshake after the run");
    for (const auto& f : {be64(size), be64(5000), be_double(peak), be_double(avg), be_double(rate)}) {
        CHECK(from_be64(p.xchg_read(f, 8, "the server's report field")) == 0);
    }
    p.close("the closing handshake");
    const std::string text = b.rp.finish();
    INFO(text);
    REQUIRE(b.rp.result.has_value());
    CHECK(text.find(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n") !=
          std::string::npos);
    CHECK(text.find(report_row(size, 5000, peak, avg, rate, true)) != std::string::npos);
    REQUIRE(b.rp.result->bw.size() == 1);
    CHECK(b.rp.result->bw[0].bw_average_mib == Approx(avg * 125000000.0 / 1048576));  // kept in MiB/s
}

// read_bw.c as the server, rig-perf the client: rig-perf's QP line offers 16 outstanding reads
// (checked in first_line), and with --report_gbits its report carries the Gb/s figures it
// printed.
TEST_CASE("perftest peer: read_bw --report_gbits, rig-perf client (out_reads 16, its report as printed)",
          "[model][perf]") {
    bench b(perf::test_kind::read_bw, true, 4096, [](perf::options& o) {
        o.report_gbits = true;
        o.size = 4096;
    });
    auto& p = *b.peer;
    p.preamble();
    p.first_line();
    p.h0("QP 0's line after connect");
    p.h0("the handshake after RTR");
    p.h0("the client's handshake after its run");
    const std::uint64_t size = from_be64(p.xchg_read(be64(0), 8, "the report's size"));
    const std::uint64_t iters = from_be64(p.xchg_read(be64(0), 8, "the report's iterations"));
    double f[3] = {};
    for (double& v : f) {
        v = std::bit_cast<double>(from_be64(p.xchg_read(be64(0), 8, "a report figure")));
    }
    p.close("the closing handshake");
    const std::string text = b.rp.finish();
    INFO(text);
    REQUIRE(b.rp.result.has_value());
    CHECK(size == 4096);
    CHECK(iters == 20);
    CHECK(f[1] > 0);
    CHECK(text.find(report_row(size, iters, f[0], f[1], f[2], true)) != std::string::npos);  // Gb/s, as printed
    CHECK(text.find(" OUT 0x10 ") != std::string::npos);  // perftest's READ_FMT in its address line
}

// write_lat.c: an extra handshake before the QP lines, no message around or between the sizes,
// and no close: the socket just ends.
TEST_CASE("perftest peer: write_lat -a, rig-perf client and server (no barrier, no close)", "[model][perf]") {
    const bool rig_perf_client = GENERATE(true, false);
    INFO("rig-perf is the " << (rig_perf_client ? "client" : "server"));
    bench b(perf::test_kind::write_lat, rig_perf_client, 4096, all_to_64);
    auto& p = *b.peer;
    p.preamble();
    p.first_line();  // H0 before the lines (write_lat.c: ctx_hand_shake(my_dest, rem_dest))
    p.h0("QP 0's line");
    p.h0("QP 0's line after connect");
    p.h0("the handshake after RTR");
    for (std::uint64_t size : sizes_to_64) {
        auto row = perf::run_lat(perf::test_kind::write_lat, p.client, *p.lane, p.settings(size, 20));
        INFO("size " << size);
        REQUIRE(row.has_value());
    }
    p.sock.expect_closed("the run");
    ::shutdown(p.sock.fd(), SHUT_WR);  // perftest exits
    const std::string text = b.rp.finish();
    INFO(text);
    REQUIRE(b.rp.result.has_value());
    CHECK(b.rp.result->lat.size() == 6);
}

// perftest's own write_lat loop on the peer's queue pair (perftest_resources.c run_iter_lat_write,
// tag v4.5-0.17, what Debian bookworm's perftest runs): post_buf is the last byte of the message
// in the first half, poll_buf the last byte in the second half (the advertised vaddr); before each
// send it waits for the peer's write carrying (char)rcnt, except the SERVER before its first send
// ("!(scnt < 1 && user_param->machine == SERVER)"): the server writes first. Returns an error
// after `bound` without progress.
std::string perftest_run_iter_lat_write(perf::lane& l, bool server, std::uint64_t size, std::uint64_t half,
                                        std::uint64_t iters) {
    std::uint64_t scnt = 0, ccnt = 0, rcnt = 0;
    std::byte* post_buf = l.buffer.data() + size - 1;
    std::byte& poll_buf = l.buffer.data()[half + size - 1];
    while (scnt < iters || ccnt < iters || rcnt < iters) {
        if (rcnt < iters && !(scnt < 1 && server)) {
            rcnt++;
            const auto by = std::chrono::steady_clock::now() + bound;
            while (std::atomic_ref<std::byte>(poll_buf).load(std::memory_order_acquire) !=
                   static_cast<std::byte>(static_cast<char>(rcnt))) {
                if (std::chrono::steady_clock::now() > by) {
                    return "perftest waited in vain for the peer's write " + std::to_string(rcnt);
                }
            }
        }
        if (scnt < iters) {
            *post_buf = static_cast<std::byte>(static_cast<char>(++scnt));
            l.qp->post_write(l.buffer, 0, size, l.peer);
            l.qp->ring(rig::side::send);
        }
        if (ccnt < iters) {
            const auto by = std::chrono::steady_clock::now() + bound;
            while (true) {
                if (auto c = l.qp->poll(rig::side::send)) {
                    if (!*c) {
                        return "send completion: " + c->error().message;
                    }
                    break;
                }
                if (std::chrono::steady_clock::now() > by) {
                    return "no send completion for write " + std::to_string(scnt);
                }
            }
            ccnt++;
        }
    }
    return "";
}

// The data path of write_lat against perftest's own loop: the perftest server writes first and
// its client waits first (issue 16: rig-perf's server waited for a Debian perftest 4.5 client's
// first write on Soft-RoCE while that client waited for the server's, until the stall deadline).
TEST_CASE("perftest peer: write_lat against perftest's run_iter_lat_write (the server writes first)",
          "[model][perf]") {
    const bool rig_perf_client = GENERATE(true, false);
    INFO("rig-perf is the " << (rig_perf_client ? "client" : "server"));
    bench b(perf::test_kind::write_lat, rig_perf_client, 4096, [](perf::options& o) { o.iterations = 50; });
    auto& p = *b.peer;
    p.preamble();
    p.first_line();
    p.h0("QP 0's line");
    p.h0("QP 0's line after connect");
    p.h0("the handshake after RTR");
    // the peer is the SERVER when rig-perf is the client
    const std::string err = perftest_run_iter_lat_write(*p.lane, rig_perf_client, 2, p.half, 50);
    CHECK(err.empty());
    INFO(err);
    p.sock.expect_closed("the run");
    ::shutdown(p.sock.fd(), SHUT_WR);  // perftest exits
    const std::string text = b.rp.finish();
    INFO(text);
    REQUIRE(b.rp.result.has_value());
    REQUIRE(b.rp.result->lat.size() == 1);
    CHECK(b.rp.result->lat[0].bytes == 2);
}

// send_bw.c: H0 right after connect, then the second round of lines; single size: H0 before
// the run (the receives are posted), none after it, then the close.
TEST_CASE("perftest peer: send_bw, rig-perf client and server (no handshake after a single size)",
          "[model][perf]") {
    const bool rig_perf_client = GENERATE(true, false);
    INFO("rig-perf is the " << (rig_perf_client ? "client" : "server"));
    bench b(perf::test_kind::send_bw, rig_perf_client, 65536, [](perf::options& o) { o.size = 65536; });
    auto& p = *b.peer;
    p.preamble();
    p.first_line();
    p.h0("QP 0's line after connect (send_bw.c: before the second round)");
    p.h0("QP 0's line, second round");
    const auto s = p.settings(65536, 20);
    std::vector<perf::lane> lanes{*p.lane};
    if (!p.client) {
        perf::post_receives(lanes[0], s);
    }
    p.h0("the handshake before the run");
    auto row = p.client ? perf::run_bw_client(perf::test_kind::send_bw, lanes, s) : perf::run_bw_receiver(lanes, s);
    REQUIRE(row.has_value());
    CHECK(row->iterations == 20);
    p.close("the closing handshake, right after the run");
    b.rp.finish();
    REQUIRE(b.rp.result.has_value());
    REQUIRE(b.rp.result->bw.size() == 1);
    CHECK(b.rp.result->bw[0].bytes == 65536);
}

// send_bw.c RUN_ALL: per size H0 (receives posted), run, H0; then the close.
TEST_CASE("perftest peer: send_bw -a, rig-perf server (a handshake before and after each size)", "[model][perf]") {
    bench b(perf::test_kind::send_bw, false, 4096, all_to_64);
    auto& p = *b.peer;
    p.preamble();
    p.first_line();
    p.h0("QP 0's line after connect");
    p.h0("QP 0's line, second round");
    std::vector<perf::lane> lanes{*p.lane};
    for (std::uint64_t size : sizes_to_64) {
        p.h0("the handshake before size " + std::to_string(size));
        auto row = perf::run_bw_client(perf::test_kind::send_bw, lanes, p.settings(size, 20));
        REQUIRE(row.has_value());
        p.h0("the handshake after size " + std::to_string(size));
    }
    p.close("the closing handshake");
    b.rp.finish();
    REQUIRE(b.rp.result.has_value());
    CHECK(b.rp.result->bw.size() == 6);
}
