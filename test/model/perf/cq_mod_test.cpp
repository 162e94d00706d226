// rig-perf's bandwidth client under CQ moderation (-Q; tools/rig-perf/loops.hpp run_bw_client)
// between two model functions of the family under test (RIG_TEST_FAMILY,
// test/model/qp_api/served_nics.hpp): one entry in cq_mod is signalled, as perftest's, so an
// mlx5 function writes that many CQEs and no more; every entry is still counted done, on every queue pair;
// a -D run ends each queue pair on a whole group; an entry that fails unsignalled is still the
// run's error; a moderation the ring cannot hold is misuse.
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

#include "test/model/qp_api/served_nics.hpp"
#include "tools/rig-perf/loops.hpp"

namespace {

namespace perf = rig::perf;
using namespace std::chrono_literals;

constexpr std::uint64_t half = 64 * 1024;

perf::loop_settings settings(std::uint64_t iterations, std::uint32_t depth, std::uint32_t cq_mod) {
    perf::loop_settings s;
    s.size = 64;
    s.half = half;
    s.iterations = iterations;
    s.tx_depth = depth;
    s.cq_mod = cq_mod;
    s.stall = 5000ms;
    return s;
}

// A queue pair of n1 connected to one of n2, as a lane from n1's region into n2's second half.
struct extra_pair {
    rig::queue_pair a, b;
    explicit extra_pair(rig::test::two_served_functions& t)
        : a(rig::test::value(t.n1->make_qp())), b(rig::test::value(t.n2->make_qp())) {
        rig::test::ok(a.connect(b.local()));
        rig::test::ok(b.connect(a.local()));
    }
};

perf::lane lane_of(rig::queue_pair& q, rig::test::two_served_functions& t, std::uint32_t key_offset = 0) {
    return perf::lane{&q, t.r1, rig::remote{t.r2.address() + half, t.r2.key() + key_offset}, 0};
}

// The CQEs the sending function (function 0) wrote since `before` are `signalled` on mlx5, whose
// driver asks a CQE of the signalled entries alone. bnxt's driver signals each doorbell batch's
// last WQE whatever the flags (qp/bnxt/send_queue.hpp ring), so there the count is the batches',
// which the loop's timing decides, and is not checked.
void check_cqes(const rig::test::served_function& m, std::uint64_t before, std::uint64_t signalled) {
    if (rig::test::family_of(0) == rig::test::family::mlx5) {
        CHECK(m.cqes_written() - before == signalled);
    }
}

}  // namespace

TEST_CASE("rig-perf -Q: 1003 WRITEs, one in 100 signalled: 11 CQEs, every entry counted, the ring empty",
          "[model][perf]") {
    rig::test::two_served_nics t(2 * half);
    rig::test::fill_pattern(t.r1.data(), 64, 23);
    std::memset(t.r2.data() + half, 0, 64);
    const std::uint32_t room = t.a.room(rig::side::send);
    const std::uint64_t cqes_before = t.m1.cqes_written();
    std::vector<perf::lane> lanes{lane_of(t.a, t)};

    auto r = perf::run_bw_client(perf::test_kind::write_bw, lanes, settings(1003, 128, 100));
    INFO((r ? std::string() : r.error()));
    REQUIRE(r.has_value());
    CHECK(r->iterations == 1003);
    CHECK(r->bw_average_mib > 0);
    CHECK(r->bw_peak_mib >= r->bw_average_mib * 0.999);   // the whole run is one of the runs tried
    // entries 99, 199 .. 999 and the last, 1002 (perftest signals the last iteration)
    check_cqes(t.m1, cqes_before, 11);
    CHECK(t.a.room(rig::side::send) == room);
    CHECK_FALSE(t.a.poll(rig::side::send).has_value());
    CHECK(rig::test::pattern_mismatch(t.r2.data() + half, 64, 23) == 64);
}

TEST_CASE("rig-perf -Q: every entry signalled with -Q 1, as before", "[model][perf]") {
    rig::test::two_served_nics t(2 * half);
    const std::uint64_t cqes_before = t.m1.cqes_written();
    std::vector<perf::lane> lanes{lane_of(t.a, t)};
    auto r = perf::run_bw_client(perf::test_kind::write_bw, lanes, settings(300, 64, 1));
    INFO((r ? std::string() : r.error()));
    REQUIRE(r.has_value());
    CHECK(r->iterations == 300);
    check_cqes(t.m1, cqes_before, 300);
}

TEST_CASE("rig-perf -Q: three queue pairs, 257 entries each at -Q 16 -t 64: 17 CQEs each, 771 counted",
          "[model][perf]") {
    rig::test::two_served_nics t(2 * half);
    extra_pair p1(t), p2(t);
    const std::uint64_t cqes_before = t.m1.cqes_written();
    std::vector<perf::lane> lanes{lane_of(t.a, t), lane_of(p1.a, t), lane_of(p2.a, t)};
    auto r = perf::run_bw_client(perf::test_kind::write_bw, lanes, settings(257, 64, 16));
    INFO((r ? std::string() : r.error()));
    REQUIRE(r.has_value());
    CHECK(r->iterations == 771);
    check_cqes(t.m1, cqes_before, 3 * 17);   // 16 groups of 16 and the last entry
    for (rig::queue_pair* q : {&t.a, &p1.a, &p2.a}) {
        CHECK_FALSE(q->poll(rig::side::send).has_value());
    }
}

TEST_CASE("rig-perf -Q: a -D run ends each queue pair on a whole group", "[model][perf]") {
    rig::test::two_served_nics t(2 * half);
    extra_pair p1(t);
    const std::uint32_t room = t.a.room(rig::side::send);
    const std::uint64_t cqes_before = t.m1.cqes_written();
    std::vector<perf::lane> lanes{lane_of(t.a, t), lane_of(p1.a, t)};
    perf::loop_settings s = settings(0, 128, 100);
    s.duration = std::chrono::nanoseconds(200ms);
    auto r = perf::run_bw_client(perf::test_kind::write_bw, lanes, s);
    INFO((r ? std::string() : r.error()));
    REQUIRE(r.has_value());
    REQUIRE(r->iterations > 0);
    CHECK(r->iterations % 100 == 0);
    check_cqes(t.m1, cqes_before, r->iterations / 100);   // one CQE a group, no more
    CHECK(t.a.room(rig::side::send) == room);                        // every entry done and taken
    CHECK(p1.a.room(rig::side::send) == room);
}

TEST_CASE("rig-perf -Q: an unsignalled entry that fails is the run's error", "[model][perf]") {
    rig::test::two_served_nics t(2 * half);
    std::vector<perf::lane> lanes{lane_of(t.a, t, 1)};   // an R_Key the peer never gave
    auto r = perf::run_bw_client(perf::test_kind::write_bw, lanes, settings(500, 128, 100));
    REQUIRE_FALSE(r.has_value());
    INFO(r.error());
    CHECK(r.error().starts_with("send completion: "));
}

TEST_CASE("rig-perf -Q: a moderation above -t, or 0, is misuse and posts nothing", "[model][perf]") {
    rig::test::two_served_nics t(2 * half);
    const std::uint32_t room = t.a.room(rig::side::send);
    std::vector<perf::lane> lanes{lane_of(t.a, t)};
    CHECK_THROWS_AS(perf::run_bw_client(perf::test_kind::write_bw, lanes, settings(100, 16, 17)), std::invalid_argument);
    CHECK_THROWS_AS(perf::run_bw_client(perf::test_kind::write_bw, lanes, settings(100, 16, 0)), std::invalid_argument);
    CHECK(t.a.room(rig::side::send) == room);
}
