#pragma once
/// @file
/// The NIC's asynchronous events through Boost.Asio (issue 18): a queue pair's event (its failure,
/// with the family's reason), the port going down or up, the NIC's firmware or machine failing.
/// The same events reach a plain callback through nic_options (qp_event, port_change, fatal:
/// rig/nic.hpp); this queues them for async_next with any completion token.
///
/// @code
///   rig::asio::nic_events events(io.get_executor());
///   rig::nic_options o;
///   events.attach(o);                                  // before nic::open: the NIC calls into it
///   auto nic = rig::nic::open(where, o).value();
///   rig::asio::nic_event e = co_await events.async_next(boost::asio::use_awaitable);
///   if (e.what == rig::asio::nic_event::kind::queue_pair_failed) { ... e.qp, e.name ... }
/// @endcode
///
/// The NIC calls the callbacks attach() set on its event thread; each queues its event (callbacks
/// o already had still run, first) and completes the oldest pending async_next, whose handler is
/// posted to its associated executor (the one given here by default): never inside the NIC's
/// thread nor inside async_next. An event with no wait pending waits in the queue (at most
/// `capacity`; beyond it the oldest are dropped and the next event says how many: `dropped`).
/// close() completes every pending async_next with errc::aborted; later ones too. The state the
/// callbacks hold is shared, so the NIC may outlive this object (its callbacks then queue into
/// a closed queue and do nothing).
/// Threads: async_next and close from any thread (a lock guards the queue).
/// Headers only (rig/asio_events_impl.hpp holds the definitions), as rig/asio.hpp.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>

#include "rig/asio.hpp"
#include "rig/error.hpp"

namespace rig {
struct nic_options;
}

namespace rig::asio {

/// One event of the NIC, as async_next gives it.
struct nic_event {
    /// What happened.
    enum class kind : std::uint8_t {
        queue_pair_failed,  ///< qp, name: the NIC failed the queue pair (mlx5 WQ_CATAS_ERROR, bnxt QP_ERROR_NOTIFICATION)
        queue_pair_event,   ///< qp, name: an event of the queue pair that is no failure (COMM_EST, SQ_DRAINED)
        port_up,            ///< the port came up (name PORT_ACTIVE)
        port_down,          ///< the port went down (name PORT_DOWN)
        nic_failed,         ///< failure: the firmware or the machine failed; the NIC is of no further use
    };
    kind what = kind::port_up;           ///< what happened
    std::uint32_t qp = 0;                ///< the queue pair's number (queue pair events)
    std::string name;                    ///< the family's name of the event, or the failure's message
    std::optional<rig::error> failure;   ///< nic_failed: why
    std::size_t dropped = 0;             ///< events dropped before this one because the queue was full
};

namespace detail {

struct event_waiter {
    virtual ~event_waiter() = default;
    virtual void complete(const boost::system::error_code& code, nic_event e) = 0;
};

// A waiter holding its handler and a work guard on the handler's executor (an io_context with a
// pending async_next keeps running, as with any pending Asio operation).
template <class Handler>
class handler_waiter final : public event_waiter {
public:
    handler_waiter(Handler&& h, const boost::asio::any_io_executor& fallback)
        : _work(boost::asio::get_associated_executor(h, fallback)), _handler(std::move(h)) {}
    void complete(const boost::system::error_code& code, nic_event e) override {
        auto ex = _work.get_executor();
        boost::asio::post(ex, [h = std::move(_handler), code, e = std::move(e)]() mutable { h(code, std::move(e)); });
        _work.reset();
    }

private:
    boost::asio::executor_work_guard<boost::asio::associated_executor_t<Handler, boost::asio::any_io_executor>> _work;
    Handler _handler;
};

struct event_queue;   // rig/asio_events_impl.hpp

}  // namespace detail

/// The NIC's events for async_next (above). Not copied, not moved.
class nic_events {
public:
    using executor_type = boost::asio::any_io_executor;              ///< handlers' default executor
    using signature = void(boost::system::error_code, nic_event);    ///< every handler's

    /// Handlers go to `ex` unless they have an executor of their own; at most `capacity` events
    /// wait for an async_next (0 counts as 1).
    explicit nic_events(executor_type ex, std::size_t capacity = 1024);
    ~nic_events();   ///< close()
    nic_events(const nic_events&) = delete;
    nic_events& operator=(const nic_events&) = delete;

    /// Sets o's qp_event, port_change and fatal to queue their events here, after calling what
    /// o held. Call it before nic::open with `o`.
    void attach(nic_options& o);

    /// The next event (the oldest queued, or the next to come).
    template <class Token>
    auto async_next(Token&& token) {
        return boost::asio::async_initiate<Token, signature>(
            [this](auto handler) {
                using H = std::decay_t<decltype(handler)>;
                wait(std::make_unique<detail::handler_waiter<H>>(std::move(handler), _executor));
            },
            token);
    }

    /// Completes every pending async_next, and any later one, with errc::aborted; drops the
    /// queued events.
    void close();
    std::size_t queued() const;    ///< events waiting for an async_next
    executor_type get_executor() const { return _executor; }   ///< the executor given here

private:
    void wait(std::unique_ptr<detail::event_waiter> w);
    executor_type _executor;
    std::shared_ptr<detail::event_queue> _queue;
};

}  // namespace rig::asio

#include "rig/asio_events_impl.hpp"   // the definitions: the adapter is headers only
