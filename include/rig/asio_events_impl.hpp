#pragma once
// rig::asio::nic_events' implementation (rig/asio_events.hpp includes it at its end; not a header
// to include on its own; headers only, as rig/asio.hpp): the queue the NIC's event thread fills
// and async_next takes from.
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "rig/asio_events.hpp"
#include "rig/nic.hpp"

namespace rig::asio {

namespace detail {

// Shared by nic_events and the callbacks it gave the NIC: either may go first.
struct event_queue {
    std::mutex lock;
    std::deque<nic_event> events;
    std::deque<std::unique_ptr<event_waiter>> waiters;
    std::size_t capacity;
    std::size_t dropped = 0;
    bool closed = false;

    explicit event_queue(std::size_t c) : capacity(c) {}

    // From the NIC's event thread: to the oldest waiter, else into the queue.
    void push(nic_event e) {
        std::unique_ptr<event_waiter> w;
        {
            std::lock_guard hold(lock);
            if (closed) {
                return;
            }
            if (waiters.empty()) {
                if (events.size() == capacity) {
                    events.pop_front();
                    ++dropped;
                }
                events.push_back(std::move(e));
                return;
            }
            w = std::move(waiters.front());
            waiters.pop_front();
            e.dropped = std::exchange(dropped, 0);
        }
        w->complete({}, std::move(e));   // posts the handler: outside the lock
    }
};

}  // namespace detail

inline nic_events::nic_events(executor_type ex, std::size_t capacity)
    : _executor(std::move(ex)), _queue(std::make_shared<detail::event_queue>(capacity == 0 ? 1 : capacity)) {}

inline nic_events::~nic_events() { close(); }

inline void nic_events::attach(nic_options& o) {
    std::weak_ptr<detail::event_queue> q = _queue;
    o.qp_event = [q, before = std::move(o.qp_event)](std::uint32_t qp, std::string_view event, bool failure) {
        if (before) {
            before(qp, event, failure);
        }
        if (auto s = q.lock()) {
            nic_event e;
            e.what = failure ? nic_event::kind::queue_pair_failed : nic_event::kind::queue_pair_event;
            e.qp = qp;
            e.name = std::string(event);
            s->push(std::move(e));
        }
    };
    o.port_change = [q, before = std::move(o.port_change)](bool up) {
        if (before) {
            before(up);
        }
        if (auto s = q.lock()) {
            nic_event e;
            e.what = up ? nic_event::kind::port_up : nic_event::kind::port_down;
            e.name = up ? "PORT_ACTIVE" : "PORT_DOWN";
            s->push(std::move(e));
        }
    };
    o.fatal = [q, before = std::move(o.fatal)](const error& failure) {
        if (before) {
            before(failure);
        }
        if (auto s = q.lock()) {
            nic_event e;
            e.what = nic_event::kind::nic_failed;
            e.name = failure.message;
            e.failure = failure;
            s->push(std::move(e));
        }
    };
}

inline void nic_events::wait(std::unique_ptr<detail::event_waiter> w) {
    std::optional<nic_event> ready;
    boost::system::error_code code;
    {
        std::lock_guard hold(_queue->lock);
        if (_queue->closed) {
            code = make_error_code(errc::aborted);
        } else if (!_queue->events.empty()) {
            ready = std::move(_queue->events.front());
            _queue->events.pop_front();
            ready->dropped = std::exchange(_queue->dropped, 0);
        } else {
            _queue->waiters.push_back(std::move(w));
            return;
        }
    }
    w->complete(code, ready ? std::move(*ready) : nic_event{});   // posted: never inline
}

inline void nic_events::close() {
    std::deque<std::unique_ptr<detail::event_waiter>> waiting;
    {
        std::lock_guard hold(_queue->lock);
        _queue->closed = true;
        _queue->events.clear();
        waiting.swap(_queue->waiters);
    }
    for (auto& w : waiting) {
        w->complete(make_error_code(errc::aborted), nic_event{});
    }
}

inline std::size_t nic_events::queued() const {
    std::lock_guard hold(_queue->lock);
    return _queue->events.size();
}

}  // namespace rig::asio
