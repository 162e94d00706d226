// rig-perf against a scripted perftest 6.06 peer (tools/rig-perf/protocol.hpp; the peer itself:
// perftest_script.hpp): at each step the peer checks that rig-perf sent exactly what a perftest
// would, and that it sends nothing more (the next read would take the wrong bytes, and the last
// one must be the close). Its data path runs Rig's API on a second model function with rig-perf's
// own loops, so the RDMA side is real: rig-perf runs its loops in a thread on the first function.
// The functions are of the family under test (RIG_TEST_FAMILY=mlx5|bnxt|mixed, served_nics.hpp;
// meson runs the suite once per family): mixed puts rig-perf on an mlx5 function and the peer on
// a bnxt one.
#include <sys/socket.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>

#include "test/model/perf/perftest_script.hpp"

namespace {

using namespace std::chrono_literals;
using namespace std::string_view_literals;
namespace perf = rig::perf;
using rig::test::family;
using rig::test::served_function;
using rig::test::quick_bnxt_model;
using rig::test::quick_model;
using rig::test::value;
using namespace rig::test::perftest;

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
    const auto report = p.serve_one_write_bw_size();
    CHECK(report[0] == 4096);
    CHECK(report[1] == 20);
    for (std::size_t f = 2; f < report.size(); ++f) {   // bw_peak, bw_avg, msgRate
        CHECK(std::bit_cast<double>(report[f]) > 0);
    }
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
        CHECK(p.serve_one_write_bw_size()[0] == 4096);
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
    // the client's run (its figures are the script's here: the server only waits), then H0 R C
    p.report_one_write_bw_size(size, 5000, peak, avg, rate);
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
