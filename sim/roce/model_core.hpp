#pragma once
// One model core: the single thread that runs the data path of every function attached to a
// wire. A function's data path is a `station`; the core calls each station's step() in turn,
// round after round, so that a frame one function transmits is received by its peer within
// the same round, on the same CPU, with the frame still in its cache. One thread instead of
// one per function also means that the switch's locks are never contended (the sender and the
// receiver are the same thread) and that a host with few cores does not run more spinning
// model threads than it has cores (issue 5: "with one model core").
//
// Pacing: after a round that did something the core runs the next at once; it keeps polling
// for busy_window after the last such round, so a doorbell rung then is seen within a round
// (a card's doorbell latency is about 1 us). After that idle rounds back off (20 us doubling
// to 1 ms), as the firmware thread does for EQ doorbells, so an idle model costs no core.
// Each station's step takes its function's lock, which that function's firmware thread
// shares, and only when it is free (step_when_free): a command that holds it for long (an
// INIT2RTR builds the queue pair's RC state under it) stops its own function's data path, as a
// card's command does its function's, not every function of the core. A busy core yields
// every 64th round, so that a waiting command gets the lock (a mutex taken back at once after
// its release would starve the waiter; CFS/EEVDF charge a yield as a spent slice, so a
// per-round yield on a busy core would starve the core instead). Rounds that find nothing
// yield once every idle_yield, not each: a yield is a system call, about 1.5 us on a VM (an
// idle round without it about 0.25 us), and a doorbell rung during it waits for its end
// (bench-model's latency: an idle round took 1.7 us when each one yielded).
//
// Threading: join and leave may be called from any thread but the core's own. leave returns
// once the station's step is not running and will not run again; it must not be called with
// a lock that a step takes (the function's lock), as the core may be waiting for that lock.
// join never waits for a round, so it may be called with that lock held.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rig::sim::roce {

class station {
public:
    // One pass of this station's data path at `now` (the round's time: the core reads the clock
    // once a round, not once a station); whether it did anything (moved a frame, fetched an
    // entry, wrote a completion). Called by the core's thread only. Must not throw.
    virtual bool step(std::chrono::steady_clock::time_point now) noexcept = 0;

protected:
    station() = default;
    ~station() = default;
    station(const station&) = default;
    station& operator=(const station&) = default;
};

// A station's step: `pass` under its function's `lock` when the lock is free; when another
// thread holds it (the function's firmware thread running a command, its vfio-user thread) the
// station is passed over this round and true returned, so that the core stays busy and comes
// back next round while its other stations move on. Never a wait: a blocked core would stop
// every function of the wire for one function's command (milliseconds for a queue pair's RC
// state on a slow host).
template <class Pass>
bool step_when_free(std::mutex& lock, Pass&& pass) noexcept {
    std::unique_lock held(lock, std::try_to_lock);
    if (!held.owns_lock()) {
        return true;
    }
    return pass();
}

class model_core {
public:
    static constexpr std::chrono::microseconds busy_window{100};
    static constexpr std::chrono::microseconds min_backoff{20};
    static constexpr std::chrono::microseconds max_backoff{1000};
    static constexpr std::chrono::microseconds idle_yield{50};

    // `name`: the thread's name (15 characters at most are kept), seen by top -H and benchmarks.
    explicit model_core(std::string name = "rig-model");
    ~model_core();  // stops the thread; every station must have left
    model_core(const model_core&) = delete;
    model_core& operator=(const model_core&) = delete;

    // Adds `s` to the rounds (the thread starts with the first station). Misuse (`s` already
    // joined) throws std::invalid_argument.
    void join(station& s);
    // Removes `s`; returns when no step of it runs. A station that is not joined: nothing.
    void leave(station& s) noexcept;

    // Stops the rounds between two of them: returns once the running round (if any) is over,
    // and none starts until resume(). For the wire, before a sender's DMA window goes, so that no
    // step reads a frame's payload by reference from it meanwhile (wire.hpp). From any thread
    // but the core's, not with a lock that a step takes (as leave); pauses may overlap.
    void pause();
    void resume() noexcept;
    bool on_core_thread() const noexcept { return std::this_thread::get_id() == _thread.get_id(); }

    std::uint64_t rounds() const noexcept { return _rounds.load(std::memory_order_relaxed); }

    // The core's thread runs on `cpu` only from now (pthread_setaffinity_np); the process's
    // other threads keep their CPUs. rig-nicsim --core-cpu: rig-perf --sim gives the core a CPU
    // of its own (tools/rig-perf/placement.hpp). False, and nothing changed, when the kernel
    // refuses it (a CPU this process may not use); misuse (cpu negative or past CPU_SETSIZE)
    // throws std::invalid_argument.
    bool run_on_cpu(int cpu);

    // The rounds stay busy (no backoff) for `window` from now, whatever they find, as after
    // work. A function whose queue pair just reached RTS asks it (any thread): its traffic
    // follows, and the first doorbell would otherwise wait for the backoff, up to max_backoff
    // (rig-perf's first-size transient, issue 17). A card never sleeps at all.
    // From another thread it also wakes a backed-off core: a command that just ran (the data
    // path follows its objects in the next round, not up to max_backoff later) asks for
    // command_window.
    void stay_busy(std::chrono::milliseconds window) noexcept;
    static constexpr std::chrono::milliseconds connect_window{50};
    static constexpr std::chrono::milliseconds command_window{2};

private:
    void loop();
    bool round(std::chrono::steady_clock::time_point now);
    bool asked_busy() const noexcept;   // stay_busy's time not over

    const std::string _name;
    // Held by the thread for a whole round: leave() takes it to know no step runs.
    std::mutex _round_lock;
    std::vector<station*> _stations;  // guarded by _round_lock and _list_lock (both to change it)
    // Short-held, never while a step runs: join() and the sleeping thread use it.
    std::mutex _list_lock;
    std::condition_variable _wake;
    std::vector<station*> _joining;  // guarded by _list_lock; moved to _stations by the thread
    std::atomic<bool> _joiners{false};  // !_joining.empty(), read by the thread without the lock
    bool _stop = false;              // guarded by _list_lock
    std::atomic<bool> _stopping{false};
    // threads in leave() or pause() that want _round_lock: the thread leaves it to them rather
    // than taking it back at once (a mutex taken back right after its release starves a waiter)
    std::atomic<std::uint32_t> _waiters{0};
    std::atomic<std::uint64_t> _rounds{0};
    std::atomic<std::chrono::steady_clock::rep> _busy_until{0};   // stay_busy's, as time_since_epoch
    std::uint32_t _busy_rounds = 0;  // the thread's own: for the yield every 64th busy round
    std::thread _thread;
};

}  // namespace rig::sim::roce
