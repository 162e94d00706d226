// rig-perf's warm-up (tools/rig-perf/loops.hpp warm_up) between two model functions of the
// family under test (RIG_TEST_FAMILY, test/model/qp_api/served_nics.hpp): -t entries on each
// queue pair, every completion taken before the measured loop starts, the bytes where the
// measured loop would put them; a failed entry is an error that says it was the warm-up;
// send_bw's warm-up (zero-length WRITEs) takes none of the peer's receives and moves no byte;
// latency tests are refused.
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

perf::loop_settings settings(std::uint64_t size, std::uint32_t depth) {
    perf::loop_settings s;
    s.size = size;
    s.half = half;
    s.tx_depth = depth;
    s.stall = 5000ms;
    return s;
}

// Lane a -> b as rig-perf's runner makes it: b advertises the start of its second half.
perf::lane lane_of(rig::test::two_served_nics& t, std::uint32_t key_offset = 0) {
    return perf::lane{&t.a, t.r1, rig::remote{t.r2.address() + half, t.r2.key() + key_offset}, 0};
}

}  // namespace

TEST_CASE("rig-perf warm-up: write_bw posts -t WRITEs, takes every completion, the bytes reach the peer",
          "[model][perf]") {
    rig::test::two_served_nics t(2 * half);
    constexpr std::uint64_t size = 4096;
    rig::test::fill_pattern(t.r1.data(), size, 17);
    std::memset(t.r2.data() + half, 0, size);
    const std::uint32_t room = t.a.room(rig::side::send);
    std::vector<perf::lane> lanes{lane_of(t)};

    auto w = perf::warm_up(perf::test_kind::write_bw, lanes, settings(size, 16));
    INFO((w ? std::string() : w.error()));
    REQUIRE(w.has_value());
    CHECK(rig::test::pattern_mismatch(t.r2.data() + half, size, 17) == size);
    CHECK(t.a.room(rig::side::send) == room);              // all 16 completed and taken
    CHECK_FALSE(t.a.poll(rig::side::send).has_value());    // none left for the timed loop
    CHECK(t.r2.data()[half + size] == std::byte{0});       // nothing past the size
}

TEST_CASE("rig-perf warm-up: read_bw reads the peer's bytes into the first half", "[model][perf]") {
    rig::test::two_served_nics t(2 * half);
    constexpr std::uint64_t size = 256;
    rig::test::fill_pattern(t.r2.data() + half, size, 99);
    std::memset(t.r1.data(), 0, size);
    std::vector<perf::lane> lanes{lane_of(t)};

    auto w = perf::warm_up(perf::test_kind::read_bw, lanes, settings(size, 8));
    INFO((w ? std::string() : w.error()));
    REQUIRE(w.has_value());
    CHECK(rig::test::pattern_mismatch(t.r1.data(), size, 99) == size);
    CHECK_FALSE(t.a.poll(rig::side::send).has_value());
}

TEST_CASE("rig-perf warm-up: -t larger than the ring posts what the ring holds", "[model][perf]") {
    rig::test::two_served_nics t(2 * half);
    const std::uint32_t room = t.a.room(rig::side::send);
    std::vector<perf::lane> lanes{lane_of(t)};
    auto w = perf::warm_up(perf::test_kind::write_bw, lanes, settings(64, room + 100));
    INFO((w ? std::string() : w.error()));
    REQUIRE(w.has_value());
    CHECK(t.a.room(rig::side::send) == room);
}

TEST_CASE("rig-perf warm-up: a refused entry is an error that names the warm-up", "[model][perf]") {
    rig::test::two_served_nics t(2 * half);
    std::vector<perf::lane> lanes{lane_of(t, 1)};   // an R_Key the peer never gave
    auto w = perf::warm_up(perf::test_kind::write_bw, lanes, settings(64, 4));
    REQUIRE_FALSE(w.has_value());
    INFO(w.error());
    CHECK(w.error().starts_with("warm-up: send completion: "));
}

// A zero-length WRITE needs no valid R_Key (IB spec C9-88): the lane carries one the peer never
// gave, and the warm-up still completes.
TEST_CASE("rig-perf warm-up: send_bw's zero-length WRITEs take none of the peer's receives and move no byte",
          "[model][perf]") {
    rig::test::two_served_nics t(2 * half);
    rig::test::fill_pattern(t.r2.data(), 2 * half, 41);
    for (int i = 0; i < 4; ++i) {
        t.b.receive(t.r2, 0, half);
    }
    const std::uint32_t receive_room = t.b.room(rig::side::receive);
    const std::uint32_t room = t.a.room(rig::side::send);
    std::vector<perf::lane> lanes{lane_of(t, 1)};

    auto w = perf::warm_up(perf::test_kind::send_bw, lanes, settings(64, 16));
    INFO((w ? std::string() : w.error()));
    REQUIRE(w.has_value());
    CHECK(t.a.room(rig::side::send) == room);              // all 16 completed and taken
    CHECK_FALSE(t.a.poll(rig::side::send).has_value());
    CHECK(t.b.room(rig::side::receive) == receive_room);   // the 4 receives still posted
    CHECK_FALSE(t.b.poll(rig::side::receive).has_value());
    CHECK(rig::test::pattern_mismatch(t.r2.data(), 2 * half, 41) == 2 * half);

    // The first SEND after it lands in the first receive, as the measured loop's would.
    rig::test::fill_pattern(t.r1.data(), 64, 5);
    t.a.send(t.r1, 0, 64);
    rig::test::expect_done(t.a, rig::side::send, 64);
    rig::test::expect_done(t.b, rig::side::receive, 64);
    CHECK(rig::test::pattern_mismatch(t.r2.data(), 64, 5) == 64);
}

TEST_CASE("rig-perf warm-up: latency tests are refused as misuse", "[model][perf]") {
    rig::test::two_served_nics t(2 * half);
    std::vector<perf::lane> lanes{lane_of(t)};
    const std::uint32_t room = t.a.room(rig::side::send);
    for (const auto k : {perf::test_kind::write_lat, perf::test_kind::send_lat, perf::test_kind::read_lat}) {
        CHECK_THROWS_AS(perf::warm_up(k, lanes, settings(64, 4)), std::invalid_argument);
    }
    CHECK(t.a.room(rig::side::send) == room);   // nothing posted
}
