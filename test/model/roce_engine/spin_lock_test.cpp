// abi/spin_lock.hpp spin_lock and shared_spin_lock (the wire's locks, a shared mlx5 bfreg's): mutual exclusion under contention
// by more threads than cores (waiters must yield to a preempted holder), and readers that never
// see a writer's half-done update.
#include <catch2/catch.hpp>

#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "sim/roce/spin_lock.hpp"

namespace sr = rig::sim::roce;

TEST_CASE("spin lock - no increment is lost with four threads contending") {
    sr::spin_lock lock;
    std::uint64_t counter = 0;  // plain: only the lock orders the threads' accesses
    constexpr int threads = 4, each = 200000;
    std::vector<std::thread> t;
    for (int k = 0; k < threads; ++k) {
        t.emplace_back([&] {
            for (int i = 0; i < each; ++i) {
                std::lock_guard g(lock);
                ++counter;
            }
        });
    }
    for (auto& x : t) {
        x.join();
    }
    CHECK(counter == std::uint64_t{threads} * each);
    CHECK(lock.try_lock());
    CHECK_FALSE(lock.try_lock());
    lock.unlock();
}

TEST_CASE("shared spin lock - readers never see a half-done write, writers exclude each other") {
    sr::shared_spin_lock lock;
    std::uint64_t a = 0, b = 0;  // a writer keeps b == 2 * a; plain fields
    std::uint64_t torn = 0, reads = 0;
    std::mutex tally;
    constexpr int writers = 2, readers = 3, writes = 50000, looks = 100000;
    std::vector<std::thread> t;
    for (int k = 0; k < writers; ++k) {
        t.emplace_back([&] {
            for (int i = 0; i < writes; ++i) {
                std::unique_lock g(lock);
                ++a;
                b += 2;
            }
        });
    }
    for (int k = 0; k < readers; ++k) {
        t.emplace_back([&] {
            std::uint64_t bad = 0;
            for (int i = 0; i < looks; ++i) {
                std::shared_lock g(lock);
                bad += b != 2 * a ? 1 : 0;
            }
            std::lock_guard g(tally);
            torn += bad;
            reads += looks;
        });
    }
    for (auto& x : t) {
        x.join();
    }
    CHECK(torn == 0);
    CHECK(reads == std::uint64_t{readers} * looks);
    CHECK(a == std::uint64_t{writers} * writes);
    CHECK(b == 2 * a);
    CHECK(lock.try_lock_shared());
    lock.unlock_shared();
}
