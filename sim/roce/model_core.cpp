#include "sim/roce/model_core.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace rig::sim::roce {

model_core::model_core(std::string name) : _name(std::move(name)) {
    _thread = std::thread([this] { loop(); });
    ::pthread_setname_np(_thread.native_handle(), _name.substr(0, 15).c_str());
}

bool model_core::run_on_cpu(int cpu) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
        throw std::invalid_argument("model_core::run_on_cpu: CPU " + std::to_string(cpu) + " is outside 0.." +
                                    std::to_string(CPU_SETSIZE - 1));
    }
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return ::pthread_setaffinity_np(_thread.native_handle(), sizeof one, &one) == 0;
}

model_core::~model_core() {
    {
        std::lock_guard g(_list_lock);
        _stop = true;
        _stopping.store(true, std::memory_order_relaxed);
    }
    _wake.notify_all();
    _thread.join();
}

void model_core::join(station& s) {
    std::lock_guard g(_list_lock);
    if (std::ranges::find(_joining, &s) != _joining.end() || std::ranges::find(_stations, &s) != _stations.end()) {
        throw std::invalid_argument("model_core::join: the station has already joined " + _name);
    }
    _joining.push_back(&s);
    _joiners.store(true, std::memory_order_release);
    _wake.notify_all();
}

void model_core::leave(station& s) noexcept {
    _waiters.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard r(_round_lock);  // no step runs past here
    _waiters.fetch_sub(1, std::memory_order_relaxed);
    std::lock_guard g(_list_lock);
    std::erase(_stations, &s);
    std::erase(_joining, &s);
}

void model_core::pause() {
    _waiters.fetch_add(1, std::memory_order_relaxed);
    _round_lock.lock();
}

void model_core::resume() noexcept {
    _waiters.fetch_sub(1, std::memory_order_relaxed);
    _round_lock.unlock();
}

bool model_core::round(std::chrono::steady_clock::time_point now) {
    std::lock_guard r(_round_lock);
    if (_joiners.load(std::memory_order_acquire)) {  // a rare event: no second lock per round otherwise
        std::lock_guard g(_list_lock);
        _stations.insert(_stations.end(), _joining.begin(), _joining.end());
        _joining.clear();
        _joiners.store(false, std::memory_order_relaxed);
    }
    bool worked = false;
    for (station* s : _stations) {
        worked |= s->step(now);
    }
    _rounds.fetch_add(1, std::memory_order_relaxed);
    return worked;
}

void model_core::stay_busy(std::chrono::milliseconds window) noexcept {
    const auto until = (std::chrono::steady_clock::now() + window).time_since_epoch().count();
    auto seen = _busy_until.load(std::memory_order_relaxed);
    while (seen < until && !_busy_until.compare_exchange_weak(seen, until, std::memory_order_relaxed)) {
    }
    if (!on_core_thread()) {
        { std::lock_guard g(_list_lock); }   // a core deciding to sleep sees the new time, or gets the notify
        _wake.notify_all();
    }
}

bool model_core::asked_busy() const noexcept {
    return std::chrono::steady_clock::now().time_since_epoch().count() < _busy_until.load(std::memory_order_relaxed);
}

void model_core::loop() {
    auto backoff = min_backoff;
    auto last_work = std::chrono::steady_clock::now();
    auto last_yield = last_work;
    while (!_stopping.load(std::memory_order_relaxed)) {
        if (_waiters.load(std::memory_order_relaxed) != 0) {
            std::this_thread::yield();   // a pause or a leave waits for _round_lock: let it in
            continue;
        }
        // one clock read a round (about 50 ns on a VM's clock source, a sixth of an idle round)
        const auto now = std::chrono::steady_clock::now();
        const bool worked = round(now);
        if (worked) {
            last_work = now;
            backoff = min_backoff;
        }
        const std::chrono::steady_clock::time_point busy_until{
            std::chrono::steady_clock::duration(_busy_until.load(std::memory_order_relaxed))};
        if (worked || now - last_work < busy_window || now < busy_until) {
            // see model_core.hpp: yield every 64th busy round, and once every idle_yield idle
            if (worked ? (++_busy_rounds & 63) == 0 : now - last_yield >= idle_yield) {
                std::this_thread::yield();
                last_yield = now;
            }
            continue;
        }
        std::unique_lock g(_list_lock);
        if (_stations.empty() && _joining.empty()) {
            // nothing to run: sleep until a station joins (leave() holds _round_lock, not this)
            _wake.wait(g, [this] { return _stop || !_joining.empty(); });
        } else {
            _wake.wait_for(g, backoff, [this] { return _stop || !_joining.empty() || asked_busy(); });
            backoff = asked_busy() ? min_backoff : std::min(backoff * 2, max_backoff);
        }
        if (!_joining.empty()) {  // a new station: look at it busily, as after work
            last_work = std::chrono::steady_clock::now();
            backoff = min_backoff;
        }
    }
}

}  // namespace rig::sim::roce
