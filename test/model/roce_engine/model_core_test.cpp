// sim/roce model_core: one thread runs every station's pass, round after round; leave waits for
// a running pass; join may be called with a lock a pass takes; an idle core backs off.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "sim/roce/model_core.hpp"
#include "sim/roce/wire.hpp"
#include "test/within.hpp"

namespace sr = rig::sim::roce;
using namespace std::chrono_literals;

namespace {

// A station that counts its passes, notes the thread that ran them, and can be told to work,
// to stall inside its pass, or to take a lock there.
struct counting_station final : sr::station {
    std::atomic<std::uint64_t> steps{0};
    std::atomic<bool> work{false};
    std::atomic<bool> in_step{false};
    std::atomic<int> stall_ms{0};
    std::mutex* lock = nullptr;
    std::mutex threads_lock;
    std::set<std::thread::id> threads;

    bool step(std::chrono::steady_clock::time_point) noexcept override {
        in_step = true;
        {
            std::lock_guard g(threads_lock);
            threads.insert(std::this_thread::get_id());
        }
        if (lock != nullptr) {
            std::lock_guard g(*lock);
        }
        if (const int ms = stall_ms.load(); ms > 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        }
        steps.fetch_add(1);
        in_step = false;
        return work.load();
    }
};

template <class Pred>
bool eventually(Pred p, std::chrono::milliseconds limit = 5000ms) {
    return rig::test::within(limit, p);
}

}  // namespace

TEST_CASE("model core - every station steps on the one core thread, and leave stops its passes") {
    sr::model_core core("rig-test-core");
    counting_station a, b;
    a.work = b.work = true;
    core.join(a);
    core.join(b);
    REQUIRE(eventually([&] { return a.steps > 1000 && b.steps > 1000; }));
    {
        std::lock_guard g1(a.threads_lock), g2(b.threads_lock);
        REQUIRE(a.threads.size() == 1);
        REQUIRE(a.threads == b.threads);  // one thread for both: one model core
        CHECK(*a.threads.begin() != std::this_thread::get_id());
    }
    // both step in the same rounds: their counts stay within one round of each other
    core.leave(a);
    const auto a_after = a.steps.load();
    REQUIRE(eventually([&] { return b.steps > a_after + 1000; }));
    CHECK(a.steps == a_after);  // no pass of a left station
    CHECK(core.rounds() >= b.steps - 1);
    core.leave(b);
    core.leave(b);  // not joined: nothing
}

TEST_CASE("model core - leave returns only once a running pass has ended") {
    sr::model_core core;
    counting_station s;
    s.stall_ms = 150;
    core.join(s);
    REQUIRE(eventually([&] { return s.in_step.load(); }));
    const auto t0 = std::chrono::steady_clock::now();
    core.leave(s);
    CHECK_FALSE(s.in_step);  // the pass it waited for has ended
    const auto steps = s.steps.load();
    std::this_thread::sleep_for(200ms);
    CHECK(s.steps == steps);
    CHECK(std::chrono::steady_clock::now() - t0 < 2s);
}

TEST_CASE("model core - join with a lock a running pass waits for does not deadlock, twice is misuse") {
    sr::model_core core;
    std::mutex fn_lock;  // as a function model's lock, taken by its pass and by commands
    counting_station a, b;
    a.lock = &fn_lock;
    a.work = true;
    core.join(a);
    REQUIRE(eventually([&] { return a.steps > 10; }));
    std::unique_lock held(fn_lock);  // a's next pass now waits for it
    auto joined = std::async(std::launch::async, [&] { core.join(b); });
    REQUIRE(joined.wait_for(2s) == std::future_status::ready);  // join never waits for a round
    held.unlock();
    REQUIRE(eventually([&] { return b.steps > 10; }));
    CHECK_THROWS_AS(core.join(b), std::invalid_argument);
    CHECK_THROWS_WITH(core.join(a), Catch::Contains("already joined"));
    core.leave(a);
    core.leave(b);
}

TEST_CASE("model core - an idle core backs off instead of spinning, and wakes for work again") {
    sr::model_core core;
    counting_station s;
    core.join(s);
    REQUIRE(eventually([&] { return s.steps > 0; }));
    std::this_thread::sleep_for(50ms);  // past the busy window: now backing off towards 1 ms
    const auto before = s.steps.load();
    std::this_thread::sleep_for(300ms);
    // at the longest backoff (1 ms) about 300 passes; a spinning core would make hundreds of thousands
    CHECK(s.steps - before < 3000);
    CHECK(s.steps - before > 30);  // it still looks: a doorbell rung now is seen within ~1 ms
    s.work = true;  // a busy station keeps the core in tight rounds
    REQUIRE(eventually([&] { return s.steps > before + 50000; }));
    core.leave(s);
}

TEST_CASE("model core - a wire makes one core on first use and keeps it") {
    sr::wire w;
    sr::model_core& c = w.core();
    CHECK(&w.core() == &c);
    counting_station s;
    c.join(s);
    REQUIRE(eventually([&] { return s.steps > 0; }));
    c.leave(s);
}

TEST_CASE("model core - pause returns once the running pass has ended and holds off the next until resume") {
    sr::model_core core("test-core");
    counting_station s;
    s.work = true;
    s.stall_ms = 50;
    core.join(s);
    REQUIRE(eventually([&] { return s.in_step.load(); }));
    core.pause();
    CHECK_FALSE(s.in_step.load());   // the pass under way ended before pause returned
    const auto paused_at = s.steps.load();
    std::this_thread::sleep_for(150ms);   // three passes' time: none ran
    CHECK(s.steps.load() == paused_at);
    core.resume();
    REQUIRE(eventually([&] { return s.steps.load() > paused_at; }));
    s.stall_ms = 0;
    core.leave(s);
}
