// A vfio-user server destroyed while its function is moving data: the function's data path
// leaves the model core at once (device::server_closing), no byte moves after, the peer's
// writes fail with retry exceeded as when a card vanishes, and nothing crashes or hangs.
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include <catch2/catch.hpp>

#include "test/model/qp_api/served_nics.hpp"

namespace {

using namespace std::chrono_literals;
using rig::side;
using rig::test::ok;
using rig::test::two_served_nics;

constexpr std::size_t message = 16 * 1024;
constexpr std::size_t slots = 64;  // destination slots of `message` bytes, reused round robin

}  // namespace

TEST_CASE("model - a server destroyed mid-traffic stops its function's data path at once; the peer's writes "
          "fail with retry exceeded, and nothing crashes",
          "[model][mlx5][api][teardown]") {
    rig::nic_options o;
    o.command_timeout = 2s;  // closing the NIC whose server is gone waits this long, once
    two_served_nics t(2 * slots * message, rig::access::remote, o);
    rig::test::fill_pattern(t.r1.data(), slots * message, 11);
    std::byte* const landing = t.r2.data() + slots * message;  // where the writes land

    std::atomic<std::uint64_t> done_ok{0};
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    // a jthread: joined on the way out of a failed REQUIRE or a throw too (a joinable std::thread
    // destroyed by the unwinding would abort the whole test program)
    std::jthread closer([&] {
        // once data moves (the first touch of each page of the client's memory by the model
        // is a page fault: slow on a VM), with writes in flight
        while (done_ok < 8 && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(1ms);
        }
        t.m2.srv.reset();  // the server's destructor: server_closing, then its DMA space goes
    });

    // Keep the send ring busy with WRITEs until one fails. Posting goes on after the server is
    // gone: every write in flight may have completed Ok just before it went, and then only a
    // later one can fail (done_ok stops growing, so at most 128 are ever outstanding).
    std::uint64_t posted = 0;
    std::optional<rig::error> failure;
    while (!failure && std::chrono::steady_clock::now() < deadline) {
        while (t.a.room(side::send) > 0 && posted - done_ok < 128) {
            const std::size_t k = posted % slots;
            t.a.write(t.r1, k * message, message, t.r2.remote(slots * message + k * message));
            ++posted;
        }
        if (auto c = t.a.wait(side::send, 100ms)) {
            if (*c) {
                ++done_ok;
            } else {
                failure = c->error();
            }
        }
    }
    closer.join();
    REQUIRE(failure.has_value());
    INFO(failure->message);
    CHECK(done_ok >= 8);  // data was moving when the server went
    CHECK_FALSE(failure->flushed);
    CHECK(failure->syndrome == rig::test::expected(rig::test::failure_kind::retry_exceeded).syndrome);
    CHECK_FALSE(t.m2.data_path_running());  // left the core with its server
    CHECK(t.w.counters().no_route > 0);     // frames to its MAC found no port after

    // every write that completed Ok landed whole (the slot of each of the first done_ok posts)
    for (std::size_t k = 0; k < std::min<std::uint64_t>(done_ok.load(), slots); ++k) {
        INFO("slot " << k);
        CHECK(std::memcmp(landing + k * message, t.r1.data() + k * message, message) == 0);
    }
    // nothing moves into the departed function's memory any more
    const std::vector<std::byte> before(landing, landing + slots * message);
    std::this_thread::sleep_for(50ms);
    CHECK(std::memcmp(before.data(), landing, before.size()) == 0);

    // the rest of the ring is flushed with the failure's error, and the surviving side closes cleanly
    while (auto c = t.a.poll(side::send)) {
        REQUIRE_FALSE(c->has_value());
        CHECK(c->error().flushed);
    }
    ok(t.n1->close());
    const auto t0 = std::chrono::steady_clock::now();
    (void)t.n2->close();  // its server is gone: an error is fine, a hang or a crash is not
    CHECK(std::chrono::steady_clock::now() - t0 < 5s);
}
