// rig-perf against a perftest peer that lies (issue 20, "Hostile peers"): the scripted perftest
// 6.06 peer of perftest_script.hpp, made to send another -q's lines, a memory window it does not
// have, a report of another size, an MTU or sys data out of range. Each run must end within its
// deadline, with an error that names what was wrong, or, where perftest takes the value, as
// perftest takes it: never a hang, never a crash. (The peer whose connection closes at every
// step: exchange_cut_test.cpp.) rig-perf runs on function 0 of the family under test
// (RIG_TEST_FAMILY), the peer on function 1.
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>

#include "rig/log.hpp"
#include "test/model/perf/perftest_script.hpp"

namespace {

using namespace std::chrono_literals;
using namespace rig::test::perftest;
using rig::test::family;
using rig::test::value;
using clock_type = std::chrono::steady_clock;

// The exchange deadline rig-perf runs with here, and how long past it a run may take to end.
constexpr auto exchange_timeout = 2000ms;
constexpr auto slack = 5s;

std::string hex(std::uint32_t v) {
    char b[16];
    std::snprintf(b, sizeof b, "%#x", v);
    return b;
}

// The line a perftest peer sends for another queue pair of its own (a -q 2 peer's QP 1): same
// region, the queue pair's number and PSN.
std::string line_of(const perftest_peer& p, const rig::queue_pair& q) {
    const rig::endpoint e = q.local();
    return key_line(out_reads_of(p.kind), e.qp, e.psn, p.buf.key(), p.buf.address() + p.half, e.gid);
}

// rig-perf's run ended in time (`t0`: before the bench started it) with an error; returns it.
std::string error_in_time(bench& b, clock_type::time_point t0, std::chrono::milliseconds within) {
    REQUIRE(b.rp.ended_within(within));
    const auto took = clock_type::now() - t0;
    const std::string text = b.rp.finish();
    INFO(text);
    INFO("took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
    REQUIRE(took < within);
    REQUIRE_FALSE(b.rp.result.has_value());
    return b.rp.result.error();
}

// rig-perf's run ended in time with a report of one BW row; returns that row.
perf::bw_row one_row_in_time(bench& b, clock_type::time_point t0, std::chrono::milliseconds within) {
    REQUIRE(b.rp.ended_within(within));
    CHECK(clock_type::now() - t0 < within);
    const std::string text = b.rp.finish();
    INFO(text);
    REQUIRE(b.rp.result.has_value());
    REQUIRE(b.rp.result->bw.size() == 1);
    return b.rp.result->bw[0];
}

auto with_queue_pairs(std::uint32_t n) {
    return [n](perf::options& o) {
        o.queue_pairs = n;
        o.exchange_timeout = exchange_timeout;
    };
}

// rig-perf -q 4 (client or server) against a -q 2 peer, up to the peer's second line: the
// preamble, then the peer's QP 0 and QP 1 lines for rig-perf's lines of its queue pairs 1 and 2.
struct two_lines_of_four {
    clock_type::time_point t0 = clock_type::now();   // before the bench starts rig-perf
    bench b;
    perftest_peer& p;
    rig::queue_pair q1;    // the peer's second queue pair
    std::string second;    // rig-perf's line for its queue pair 2
    explicit two_lines_of_four(bool rig_perf_client)
        : b(perf::test_kind::write_bw, rig_perf_client, 4096, with_queue_pairs(4)), p(*b.peer),
          q1(value(p.nic->make_qp())) {
        p.preamble();
        p.first_line();
        second = p.xchg_read(line_of(p, q1), 108, "rig-perf's line for its queue pair 2");
    }
};

}  // namespace

// A -q 2 perftest against rig-perf -q 4: after its two lines it goes on to its next message, the
// second round (write_bw.c), whose first line is its QP 0 line again. Taken as the line of
// rig-perf's queue pair 3 it would connect two of rig-perf's queue pairs to one peer QP.
TEST_CASE("lying peer: -q 2 against rig-perf -q 4, its QP 0 line comes again: refused by name",
          "[model][perf]") {
    const bool rig_perf_client = GENERATE(true, false);
    INFO("rig-perf is the " << (rig_perf_client ? "client" : "server"));
    two_lines_of_four run(rig_perf_client);
    auto& p = run.p;
    CHECK(run.second.size() == 108);
    CHECK(run.second != p.theirs);
    // the second round, as a -q 2 perftest runs it: QP 0's line
    static_cast<void>(p.xchg_read(p.mine, 108, "rig-perf's line for its queue pair 3"));
    p.sock.expect_closed("the peer's QP 0 line again");
    const std::string err = error_in_time(run.b, run.t0, exchange_timeout + slack);
    CHECK(err == "the peer named QP " + hex(p.qp.local().qp) +
                     " for queue pair 3 and for queue pair 1: do both sides run the same -q?");
}

// The same peer silent after its two lines: rig-perf waits for the third for its exchange
// deadline, and says which line it waited for.
TEST_CASE("lying peer: two QP lines of four, then silence: the line waited for is named at the deadline",
          "[model][perf]") {
    const bool rig_perf_client = GENERATE(true, false);
    INFO("rig-perf is the " << (rig_perf_client ? "client" : "server"));
    two_lines_of_four run(rig_perf_client);
    auto& p = run.p;
    const std::string err = error_in_time(run.b, run.t0, exchange_timeout + slack);
    CHECK(clock_type::now() - run.t0 >= exchange_timeout);
    CHECK(err == "the peer's line for queue pair 3 of 4: timeout after 2000 ms waiting for QP info from the peer");
    if (rig_perf_client) {  // the client wrote its third line before it waited for the peer's
        CHECK(p.sock.read(108, "rig-perf's line for its queue pair 3").size() == 108);
    }
    p.sock.expect_closed("the deadline");
}

// A -q 2 perftest against rig-perf -q 1: its QP 1 line arrives where rig-perf waits for its QP 0
// line again, in the second round (write_bw.c) or in the handshake right after the first
// (send_bw.c). perftest would take it (ctx_hand_shake overwrites rem_dest[0]).
TEST_CASE("lying peer: -q 2 against rig-perf -q 1, its QP 1 line where QP 0's comes again: refused by name",
          "[model][perf]") {
    const bool rig_perf_client = GENERATE(true, false);
    const auto kind = GENERATE(perf::test_kind::write_bw, perf::test_kind::send_bw);
    INFO("rig-perf is the " << (rig_perf_client ? "client" : "server") << ", test " << static_cast<int>(kind));
    const auto t0 = clock_type::now();
    bench b(kind, rig_perf_client, 4096, with_queue_pairs(1));
    auto& p = *b.peer;
    rig::queue_pair q1 = value(p.nic->make_qp());
    p.preamble();
    p.first_line();
    // a -q 1 side has one line to send (a server answers before it looks at what it read:
    // exchange.hpp channel::exchange)
    CHECK(p.xchg_read(line_of(p, q1), 108, "rig-perf's QP 0 line again") == p.theirs);
    p.sock.expect_closed("the peer's QP 1 line");
    const std::string err = error_in_time(b, t0, exchange_timeout + slack);
    const std::string which = kind == perf::test_kind::write_bw ? "the peer's second line for queue pair 1"
                                                                : "the peer's handshake (its queue pair 1's line again)";
    CHECK(err == which + " names QP " + hex(q1.local().qp) + ", its first named QP " + hex(p.qp.local().qp) +
                     ": do both sides run the same -q?");
}

// A peer whose second-round line for its queue pair differs from its first in the window it
// advertises: perftest's run would write by the second (ctx_hand_shake overwrites rem_dest[i]),
// rig-perf's lanes were set by the first; neither is to be trusted, so it is refused by name.
TEST_CASE("lying peer: a second line with another rkey or vaddr than the first: refused by name", "[model][perf]") {
    const bool rig_perf_client = GENERATE(true, false);
    const bool rkey = GENERATE(true, false);
    INFO("rig-perf is the " << (rig_perf_client ? "client" : "server") << (rkey ? ", rkey" : ", vaddr"));
    const auto t0 = clock_type::now();
    bench b(perf::test_kind::write_bw, rig_perf_client, 4096, with_queue_pairs(1));
    auto& p = *b.peer;
    p.preamble();
    p.first_line();
    const rig::endpoint e = p.qp.local();
    const std::uint32_t key = p.buf.key();
    const std::uint64_t vaddr = p.buf.address() + p.half;
    p.mine = key_line(out_reads_of(p.kind), e.qp, e.psn, rkey ? key + 1 : key, rkey ? vaddr : vaddr - 4096, e.gid);
    CHECK(p.xchg_read(p.mine, 108, "rig-perf's QP 0 line again") == p.theirs);
    p.sock.expect_closed("the peer's changed line");
    const std::string err = error_in_time(b, t0, exchange_timeout + slack);
    char want[256];
    if (rkey) {
        std::snprintf(want, sizeof want, "has rkey %#x, its first had %#x", key + 1, key);
    } else {
        std::snprintf(want, sizeof want, "has vaddr %#llx, its first had %#llx",
                      static_cast<unsigned long long>(vaddr - 4096), static_cast<unsigned long long>(vaddr));
    }
    CHECK(err == "the peer's second line for queue pair 1 " + std::string(want) +
                     ": perftest sends a queue pair's line unchanged every time");
}

// A peer whose line advertises a window it does not have: the vaddr of its region's end, or
// another rkey. The first WRITE or READ comes back NAKed (remote access error): those of the
// warm-up before the first size (tools/rig-perf/runner.cpp); rig-perf's run ends with that
// completion error, named as the warm-up's, within the deadline, and closes.
TEST_CASE("lying peer: a QP line with a wrong vaddr or rkey: the remote access error ends rig-perf's run",
          "[model][perf]") {
    const auto kind = GENERATE(perf::test_kind::write_bw, perf::test_kind::read_bw);
    const bool bad_key = GENERATE(false, true);
    INFO("test " << static_cast<int>(kind) << (bad_key ? ", wrong rkey" : ", vaddr of the region's end"));
    const auto t0 = clock_type::now();
    bench b(kind, true, 4096, [](perf::options& o) {
        o.size = 64;
        o.exchange_timeout = exchange_timeout;
    });
    auto& p = *b.peer;
    const rig::endpoint e = p.qp.local();
    const std::uint32_t rkey = bad_key ? p.buf.key() ^ 0x80 : p.buf.key();
    const std::uint64_t vaddr = bad_key ? p.buf.address() + p.half : p.buf.address() + 2 * p.half;
    p.mine = key_line(out_reads_of(kind), e.qp, e.psn, rkey, vaddr, e.gid);
    p.preamble();
    p.first_line();
    p.h0("QP 0's line after connect");
    p.h0("the handshake after RTR");
    p.sock.expect_closed("the failed run");  // no handshake after the run: rig-perf failed
    const std::string err = error_in_time(b, t0, exchange_timeout + slack);
    const std::string verb = kind == perf::test_kind::write_bw ? "send" : "read";
    const std::string status = rig::test::family_of(0) == family::bnxt ? "REMOTE_ACCESS_ERR" : "remote access error";
    INFO("rig-perf's error: " << err);
    CHECK(err.starts_with("warm-up: " + verb + " completion: "));
    CHECK(err.find(status) != std::string::npos);
}

// A client that reports another size than the server ran (write_bw.c: xchg_bw_reports, then
// print_full_bw_report(rem_bw_rep)): perftest prints the client's row as it came. So does
// rig-perf, with a warning naming both sizes; the run returns, and its row is the client's.
TEST_CASE("lying peer: a BW report of another size: rig-perf's server warns and keeps the client's row",
          "[model][perf]") {
    std::mutex lock;
    std::vector<std::string> warnings;
    rig::set_log_handler([&](const rig::log_record& r) {
        if (r.logger == "perf" && r.level == rig::log_level::warn) {
            std::lock_guard g(lock);
            warnings.emplace_back(r.message);
        }
    });
    struct unset {
        ~unset() { rig::set_log_handler({}); }
    } restore;
    const auto t0 = clock_type::now();
    bench b(perf::test_kind::write_bw, false, 4096, [](perf::options& o) {
        o.size = 4096;
        o.exchange_timeout = exchange_timeout;
    });
    auto& p = *b.peer;
    p.preamble();
    p.first_line();
    p.report_one_write_bw_size(65536, 5000, 94.5, 92.25, 0.17);
    const perf::bw_row row = one_row_in_time(b, t0, exchange_timeout + slack);
    CHECK(row.bytes == 65536);
    CHECK(row.iterations == 5000);
    CHECK(row.bw_average_mib == 92.25);
    std::lock_guard g(lock);
    CHECK(warnings == std::vector<std::string>{"the client reported its last size as 65536 bytes, this side ran up "
                                               "to 4096 (same options on both sides?)"});
}

// check_mtu takes the peer's MTU only when valid_mtu_size (IBV_MTU_256..IBV_MTU_4096) and keeps
// its own otherwise: perftest never refuses one. rig-perf refuses it by name (decode_mtu): a
// perftest sends 1..5, so anything else is a peer that lies, and running at a guess would fail
// later and less clearly.
TEST_CASE("lying peer: an MTU out of range (\"9\\0\"): refused by name", "[model][perf]") {
    const bool rig_perf_client = GENERATE(true, false);
    INFO("rig-perf is the " << (rig_perf_client ? "client" : "server"));
    const auto t0 = clock_type::now();
    bench b(perf::test_kind::write_bw, rig_perf_client, 4096,
            [](perf::options& o) { o.exchange_timeout = exchange_timeout; });
    auto& p = *b.peer;
    p.xchg(version_msg(), version_msg(), "the version");
    p.xchg(be32(4096), be32(4096), "cycle_buffer");
    p.xchg(be32(64), be32(64), "cache_line_size");
    CHECK(p.xchg_read(std::string("9\0", 2), 2, "the MTU") == std::string("5\0", 2));  // either side answers
    p.sock.expect_closed("the MTU");
    CHECK(error_in_time(b, t0, exchange_timeout + slack) ==
          "peer sent MTU '9\\0', expected an ibv_mtu value 1..5 and a NUL");
}

// check_sys_data keeps the larger of both sides' page size and cache line (as ints): a peer's 0
// loses, and so does 2^31 (negative as an int). rig-perf keeps the larger too (unsigned: it would
// keep 2^31, which it only logs, exchange.cpp exchange_setup) and refuses neither: the run goes on.
TEST_CASE("lying peer: a page size and cache line of 0 or 2^31 are taken, the run goes on", "[model][perf]") {
    const std::uint32_t lie = GENERATE(0u, 1u << 31);
    INFO("the peer's page size and cache line: " << lie);
    const auto t0 = clock_type::now();
    bench b(perf::test_kind::write_bw, true, 4096, [](perf::options& o) { o.exchange_timeout = exchange_timeout; });
    auto& p = *b.peer;
    p.xchg(version_msg(), version_msg(), "the version");
    p.xchg(be32(lie), be32(4096), "cycle_buffer");
    p.xchg(be32(lie), be32(64), "cache_line_size");
    p.xchg(std::string("3\0", 2), std::string("5\0", 2), "the MTU");
    p.first_line();
    CHECK(p.serve_one_write_bw_size()[0] == 2);
    CHECK(one_row_in_time(b, t0, exchange_timeout + slack).bytes == 2);
}
