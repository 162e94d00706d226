#pragma once
// A recursive mutex that hands itself to waiting threads in the order they asked (a ticket lock
// with an owner and a depth), for a function's control calls (function.hpp: one at a time, from
// any thread).
//
// Why not std::recursive_mutex: it promises no order, and glibc's lets the thread that just
// unlocked take it again before a woken waiter runs. A thread that rings doorbell after doorbell
// through region_write (mlx5 commands polled with the EQ live) then keeps the lock from the
// event thread, whose own region_write is the EQ consumer doorbell: the EQ fills and the device
// raises ASYNCHRONOUS_EQ_BUF_OVERRUN (test/model/mlx5_events, "polled commands back to back").
// Control calls are system calls or socket round trips, so the condition variable costs nothing
// that shows; nothing on the data path takes this lock.
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace rig::driver {

class fifo_recursive_mutex {
public:
    void lock() {
        const auto me = std::this_thread::get_id();
        std::unique_lock guard(_state);
        if (_owner == me) {
            ++_depth;
            return;
        }
        const std::uint64_t ticket = _next_ticket++;
        _turn.wait(guard, [&] { return _serving == ticket; });
        _owner = me;
        _depth = 1;
    }

    void unlock() {
        std::unique_lock guard(_state);
        if (--_depth > 0) {
            return;
        }
        _owner = {};
        ++_serving;
        const bool waiting = _next_ticket != _serving;
        guard.unlock();
        if (waiting) {
            _turn.notify_all();  // the next ticket's holder takes it; the others wait again
        }
    }

    // Threads waiting for their turn now (not the owner): for tests and diagnostics.
    std::uint64_t waiting() const {
        std::scoped_lock guard(_state);
        return _next_ticket - _serving - (_owner != std::thread::id{} ? 1 : 0);
    }

private:
    mutable std::mutex _state;
    std::condition_variable _turn;
    std::uint64_t _next_ticket = 0;  // the ticket the next new locker takes
    std::uint64_t _serving = 0;      // the ticket that holds (or may now take) the lock
    std::thread::id _owner;
    unsigned _depth = 0;
};

}  // namespace rig::driver
