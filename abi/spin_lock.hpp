#pragma once
// Spin locks for short sections: the model's wire (a list splice, a table scan; almost never
// contended since one model core runs every function's data path, sim/roce/model_core.hpp) and a
// shared mlx5 bfreg's doorbell (qp/mlx5/bfreg.hpp, as rdma-core's mlx5_spinlock). Beside the
// barriers (barriers.hpp): CPU primitives both the driver and the model use. std::mutex and std::shared_mutex cost a call into glibc and two locked
// operations per lock/unlock pair even then; these cost one locked operation to take and a
// plain release store to give back, inlined. A waiter spins with the CPU's pause hint, then
// yields after `spins_before_yield`, so a holder preempted on an oversubscribed host (the
// model's 2-core CI machines) gets its CPU back instead of being starved by spinners.
// Not recursive; no fairness beyond that. Both meet the standard Lockable / SharedLockable
// requirements (std::lock_guard, std::unique_lock, std::shared_lock).
#include <atomic>
#include <cstdint>
#include <thread>

namespace rig::abi {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

inline constexpr int spins_before_yield = 128;

class spin_lock {
public:
    void lock() noexcept {
        // test-and-test-and-set: spin on a plain load so waiters do not bounce the line
        while (_held.exchange(true, std::memory_order_acquire)) {
            for (int n = 0; _held.load(std::memory_order_relaxed); ++n) {
                if (n < spins_before_yield) {
                    cpu_relax();
                } else {
                    std::this_thread::yield();
                }
            }
        }
    }
    bool try_lock() noexcept {
        return !_held.load(std::memory_order_relaxed) && !_held.exchange(true, std::memory_order_acquire);
    }
    void unlock() noexcept { _held.store(false, std::memory_order_release); }

private:
    std::atomic<bool> _held{false};
};

// Many readers or one writer. A writer announces itself first (the writer bit), so new readers
// wait and a steady stream of readers cannot starve it; then it waits for the readers in.
class shared_spin_lock {
public:
    void lock() noexcept {
        std::uint32_t s = _state.load(std::memory_order_relaxed);
        for (int n = 0;; ++n) {
            if ((s & writer) == 0 && _state.compare_exchange_weak(s, s | writer, std::memory_order_acquire)) {
                break;
            }
            pause(n);
            s = _state.load(std::memory_order_relaxed);
        }
        for (int n = 0; (_state.load(std::memory_order_acquire) & ~writer) != 0; ++n) {
            pause(n);
        }
    }
    void unlock() noexcept { _state.fetch_and(~writer, std::memory_order_release); }

    void lock_shared() noexcept {
        for (int n = 0;; ++n) {
            if ((_state.fetch_add(1, std::memory_order_acquire) & writer) == 0) {
                return;
            }
            _state.fetch_sub(1, std::memory_order_relaxed);  // a writer holds or wants it: back off
            while ((_state.load(std::memory_order_relaxed) & writer) != 0) {
                pause(n++);
            }
        }
    }
    bool try_lock_shared() noexcept {
        if ((_state.fetch_add(1, std::memory_order_acquire) & writer) == 0) {
            return true;
        }
        _state.fetch_sub(1, std::memory_order_relaxed);
        return false;
    }
    void unlock_shared() noexcept { _state.fetch_sub(1, std::memory_order_release); }

private:
    static constexpr std::uint32_t writer = 1u << 31;
    static void pause(int n) noexcept {
        if (n < spins_before_yield) {
            cpu_relax();
        } else {
            std::this_thread::yield();
        }
    }
    std::atomic<std::uint32_t> _state{0};  // writer bit | number of readers in or entering
};

}  // namespace rig::abi
