#pragma once
// Waiting in a test: every wait has a deadline, and a wait that runs out says so (false) rather
// than hanging the suite.
#include <chrono>
#include <mutex>
#include <thread>

namespace rig::test {

// True once `done()` holds, looked at every `step`; false when `bound` passes first (after one
// last look at the deadline, so a state reached just then still counts).
template <class F>
bool within(std::chrono::steady_clock::duration bound, F&& done,
            std::chrono::steady_clock::duration step = std::chrono::milliseconds(1)) {
    const auto until = std::chrono::steady_clock::now() + bound;
    while (!done()) {
        if (std::chrono::steady_clock::now() >= until) {
            return done();
        }
        std::this_thread::sleep_for(step);
    }
    return true;
}

// The same with `lock` held around each look: what `done` reads is written by another thread
// (an event handler) under that lock.
template <class F>
bool within(std::mutex& lock, std::chrono::steady_clock::duration bound, F&& done) {
    return within(bound, [&] {
        std::lock_guard g(lock);
        return done();
    });
}

}  // namespace rig::test
