#pragma once
/// @file
/// Boost.Asio for a completion group (issue 18; Boost 1.74 as Debian ships it): each post of a
/// queue pair of the group as an asynchronous operation whose handler gets the entry's
/// rig::completion, with any completion token (a callback, use_future, use_awaitable,
/// yield_context).
///
/// @code
///   rig::completion_group g = nic->make_group().value();
///   rig::asio::group a = rig::asio::group::make(io.get_executor(), g).value();
///   rig::queue_pair q = a.make_qp(*nic).value();                 // of g, known to the adapter
///   q.connect(peer).value();
///   rig::completion c = co_await a.async_write(q, r, 0, 64, peer_remote, boost::asio::use_awaitable);
/// @endcode
///
/// How it runs: the adapter owns the tags of its posts (a slot of its table and the slot's
/// generation), so a completion the group hands out finds its handler. While some entry is in
/// flight it keeps one async_wait(wait_read) on the group's eventfd (a dup: stream_descriptor
/// closes what it holds, the NIC owns the original); when readable it drains poll() until 0,
/// then arm(), poll() again, and only then waits again (rig/group.hpp's drain-arm-drain). With
/// nothing in flight it keeps no wait, so an idle adapter costs nothing and io_context::run can
/// return. A look timer (options::look_interval) also drains now and then while entries are in
/// flight: a lost event costs one look, never a hang (as completion_group::wait looks again).
///
/// Handlers: never run inside the initiating call nor inside close()/destroy(): each is posted
/// (boost::asio::post) to its associated executor, the adapter's executor by default, with its
/// associated allocator for the pending operation's memory (and the post's, where the executor
/// takes Asio's allocator property: any_io_executor does not in 1.74), freed before it runs,
/// as Asio's requirements on asynchronous operations ask
/// (boost.org/doc/libs/1_74_0/doc/html/boost_asio/reference/asynchronous_operations.html:
/// "Execution of a handler" and "Allocation of intermediate storage"; the tokens through
/// reference/async_initiate.html). The signature is void(boost::system::error_code,
/// rig::completion): the code says the completion's failure in rig::asio::category() (entry,
/// flushed, ...), or aborted for an operation completed by close() or destroy().
/// (use_awaitable with g++ 12's libstdc++: include <utility> before <boost/asio/awaitable.hpp>,
/// which uses std::exchange without it in Boost 1.74.)
///
/// The post itself happens in the initiating call, before the token is applied: misuse throws
/// std::invalid_argument from the call whatever the token, and nothing is posted. With
/// use_awaitable, co_await the awaitable at once (its handler attaches when it is awaited; a
/// completion that came first waits for it).
///
/// Threads: the adapter, its initiating functions, destroy and close, and the handlers of its
/// eventfd wait run on one thread at a time: give it a single-threaded io_context's executor or
/// a strand, and call it from that executor. (On an io_context run by many threads, Asio's epoll
/// reactor, which registers descriptors edge-triggered, may take the eventfd's edge on another
/// thread before the wait is queued: that completion then waits for the next look.)
/// Queue pairs used with it are made with make_qp and posted to through it only (a tag of another
/// post could name a slot), destroyed through destroy(). Close the adapter (or destroy it) before
/// its NIC is destroyed; a NIC closed under it (which destroys the group without an event) has its
/// pending handlers completed with aborted at the next look.
///
/// Headers only (rig/asio_impl.hpp holds the definitions): a program that includes this needs
/// Boost's headers and librig, no Boost library and no Rig library of its own.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>

#include "rig/completion.hpp"
#include "rig/error.hpp"
#include "rig/group.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"

namespace rig {
class nic;
}

namespace rig::asio {

/// Rig's kinds of failure as error codes (category "rig").
enum class errc : int {
    os = 1,    ///< the OS or the PCI layer refused (rig::error_kind::os)
    firmware,  ///< the firmware refused a command or stopped answering (error_kind::firmware)
    entry,     ///< the work entry failed itself (error_kind::entry): its queue pair has failed
    flushed,   ///< its queue pair had failed before it ran (rig::error::flushed)
    aborted,   ///< completed by the adapter's close() or destroy(): its result was never taken
};

/// The error category of errc, named "rig": one object in the program.
inline const boost::system::error_category& category() noexcept;
/// errc as a boost::system::error_code of category().
inline boost::system::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), category()}; }
/// A failure as its code: os, firmware, entry, or flushed.
inline boost::system::error_code code_of(const rig::error& e) noexcept;
/// The completion's failure as its code; success when it completed Ok.
inline boost::system::error_code code_of(const completion& c) noexcept {
    return c.failure ? code_of(*c.failure) : boost::system::error_code();
}

/// How an asio::group polls and sleeps.
struct options {
    /// Completions taken from the group per poll.
    static constexpr std::size_t batch = 64;
    /// While entries are in flight, how often the group is drained without an event (0: never).
    std::chrono::milliseconds look_interval{100};
    /// Poll without sleeping for this long after the last completion, yielding to the executor's
    /// other handlers between polls, before arming and sleeping on the eventfd (0: sleep at once).
    /// Lower latency at the price of a busy core while it spins.
    std::chrono::microseconds spin{0};
};

namespace detail {

class core;

// An operation waiting for its completion: the handler, type-erased. finish() gives the memory
// back, then posts the handler with its arguments (Asio's rule: memory freed before the upcall).
struct pending_op {
    void (*finish)(pending_op*, const boost::system::error_code&, completion&&);
};

// A handler with its arguments, for post(); keeps the handler's associated executor and allocator.
template <class Handler>
struct bound_handler {
    Handler handler;
    boost::system::error_code code;
    completion done;
    void operator()() { handler(code, std::move(done)); }
};

template <class Handler>
class handler_op final : public pending_op {
public:
    using executor = boost::asio::associated_executor_t<Handler, boost::asio::any_io_executor>;
    using allocator = typename std::allocator_traits<
        boost::asio::associated_allocator_t<Handler>>::template rebind_alloc<handler_op>;
    using traits = std::allocator_traits<allocator>;

    // In memory from the handler's associated allocator; work counted on its executor, so that
    // its io_context does not run out of work while the operation is pending.
    static pending_op* make(Handler h, const boost::asio::any_io_executor& fallback) {
        allocator a(boost::asio::get_associated_allocator(h));
        handler_op* p = traits::allocate(a, 1);
        try {
            traits::construct(a, p, std::move(h), fallback);
        } catch (...) {
            traits::deallocate(a, p, 1);
            throw;
        }
        return p;
    }

    handler_op(Handler&& h, const boost::asio::any_io_executor& fallback)
        : pending_op{&finish}, _work(boost::asio::get_associated_executor(h, fallback)), _handler(std::move(h)) {}

private:
    static void finish(pending_op* base, const boost::system::error_code& code, completion&& c) {
        auto* self = static_cast<handler_op*>(base);
        allocator a(boost::asio::get_associated_allocator(self->_handler));
        bound_handler<Handler> b{std::move(self->_handler), code, std::move(c)};
        boost::asio::executor_work_guard<executor> work(std::move(self->_work));
        traits::destroy(a, self);
        traits::deallocate(a, self, 1);
        boost::asio::post(work.get_executor(), std::move(b));
    }

    boost::asio::executor_work_guard<executor> _work;
    Handler _handler;
};

}  // namespace detail

/// The Asio face of one completion group. Movable; a moved-from adapter is empty (misuse to use).
class group {
public:
    using executor_type = boost::asio::any_io_executor;                  ///< the adapter's executor
    using signature = void(boost::system::error_code, completion);       ///< every handler's

    /// An adapter of `g` on `ex`: error if the eventfd cannot be duplicated (the OS's refusal).
    /// Misuse: g destroyed. The adapter keeps a reference to the handle `g`: it must stay where
    /// it is (not moved from) until the adapter's close().
    static result<group> make(executor_type ex, completion_group& g, const options& o = {});

    group() = default;
    /// Takes the other adapter's group; that one is left empty.
    group(group&&) noexcept = default;
    /// close(), then takes the other adapter's group; that one is left empty.
    group& operator=(group&& o) noexcept;
    ~group();  ///< close()

    /// The executor given to make (misuse: closed).
    executor_type get_executor() const;

    /// A queue pair of the group (nic::make_qp(g): misuse if `n` is not g's NIC), known to the
    /// adapter from now on. Misuse: closed.
    result<queue_pair> make_qp(rig::nic& n);
    /// queue_pair::destroy, after the completions the group holds for it are taken; its handlers
    /// still pending complete with errc::aborted (the entries of a destroyed queue pair never
    /// complete). Misuse: closed, q not made by this adapter, destroyed.
    result<void> destroy(queue_pair& q);
    /// Completes every pending handler with errc::aborted and stops waiting; the group and its
    /// queue pairs are left as they are. Idempotent; later posts are misuse.
    void close();
    bool closed() const noexcept;          ///< close() was called, or the adapter is empty
    std::size_t pending() const noexcept;  ///< handlers not yet completed

    /// @name Posts
    /// The queue pair's post forms (rig/qp.hpp), every entry signalled, its tag the adapter's;
    /// the handler gets the entry's completion. Misuse (thrown from the call, nothing posted):
    /// the adapter closed, q not made by it, and the post's own misuse.
    /// @{

    /// queue_pair::send of r[at, at + n).
    template <class Token>
    auto async_send(queue_pair& q, const region& r, std::size_t at, std::size_t n, Token&& token) {
        return start(q, "async_send", side::send, operation::send,
                     [&](std::uint64_t tag) { q.send(r, at, n, tag); }, std::forward<Token>(token));
    }
    /// queue_pair::receive into r[at, at + n).
    template <class Token>
    auto async_receive(queue_pair& q, const region& r, std::size_t at, std::size_t n, Token&& token) {
        return start(q, "async_receive", side::receive, operation::receive,
                     [&](std::uint64_t tag) { q.receive(r, at, n, tag); }, std::forward<Token>(token));
    }
    /// queue_pair::write of r[at, at + n) to `to`.
    template <class Token>
    auto async_write(queue_pair& q, const region& r, std::size_t at, std::size_t n, const remote& to,
                     Token&& token) {
        return start(q, "async_write", side::send, operation::write,
                     [&](std::uint64_t tag) { q.write(r, at, n, to, tag); }, std::forward<Token>(token));
    }
    /// queue_pair::write_inline of `bytes` to `to`.
    template <class Token>
    auto async_write_inline(queue_pair& q, std::span<const std::byte> bytes, const remote& to, Token&& token) {
        return start(q, "async_write_inline", side::send, operation::write,
                     [&](std::uint64_t tag) { q.write_inline(bytes, to, tag); }, std::forward<Token>(token));
    }
    /// queue_pair::read of n bytes at `from` into r[at, at + n).
    template <class Token>
    auto async_read(queue_pair& q, const remote& from, const region& r, std::size_t at, std::size_t n,
                    Token&& token) {
        return start(q, "async_read", side::send, operation::read,
                     [&](std::uint64_t tag) { q.read(from, r, at, n, tag); }, std::forward<Token>(token));
    }
    /// queue_pair::send_imm: the peer's receive completes with completion::immediate.
    template <class Token>
    auto async_send_imm(queue_pair& q, const region& r, std::size_t at, std::size_t n, std::uint32_t immediate,
                        Token&& token) {
        return start(q, "async_send_imm", side::send, operation::send_imm,
                     [&](std::uint64_t tag) { q.send_imm(r, at, n, immediate, tag); }, std::forward<Token>(token));
    }
    /// queue_pair::write_imm: the bytes at `to`, then the peer's receive completes with
    /// completion::immediate.
    template <class Token>
    auto async_write_imm(queue_pair& q, const region& r, std::size_t at, std::size_t n, const remote& to,
                         std::uint32_t immediate, Token&& token) {
        return start(q, "async_write_imm", side::send, operation::write_imm,
                     [&](std::uint64_t tag) { q.write_imm(r, at, n, to, immediate, tag); },
                     std::forward<Token>(token));
    }
    /// @}

private:
    explicit group(std::shared_ptr<detail::core> c) noexcept : _core(std::move(c)) {}

    // The operation's handler attached to the slot of `tag` (async_initiate's initiation).
    struct initiation {
        std::shared_ptr<detail::core> core;
        executor_type ex;
        template <class Handler>
        void operator()(Handler&& h, std::uint64_t tag) const {
            using op = detail::handler_op<std::decay_t<Handler>>;
            attach(*core, tag, op::make(std::decay_t<Handler>(std::forward<Handler>(h)), ex));
        }
    };

    // The post made with a tag of the adapter's, then the token applied (boost::asio::async_initiate).
    template <class Post, class Token>
    auto start(queue_pair& q, const char* call, side ring, operation op, Post&& post, Token&& token) {
        detail::core& c = live(call);
        const std::uint64_t tag = begin(c, q, call, ring, op);
        try {
            post(tag);
        } catch (...) {
            abandon(c, tag);
            throw;
        }
        posted(c, tag);
        return boost::asio::async_initiate<Token, signature>(initiation{_core, executor_of(c)}, token, tag);
    }

    detail::core& live(const char* call) const;
    // q's number. Misuse: q not made by this adapter, or destroyed.
    static std::uint32_t member_of(const detail::core& c, const queue_pair& q, const char* call);
    // A free slot's tag for a post on q. Misuse: as member_of.
    static std::uint64_t begin(detail::core& c, const queue_pair& q, const char* call, side ring, operation op);
    static void abandon(detail::core& c, std::uint64_t tag) noexcept;  // the post threw: the slot back
    static void posted(detail::core& c, std::uint64_t tag);            // in flight: the wait started
    static void attach(detail::core& c, std::uint64_t tag, detail::pending_op* op);
    static executor_type executor_of(const detail::core& c);

    std::shared_ptr<detail::core> _core;
};

}  // namespace rig::asio

/// @cond INTERNAL
template <>
struct boost::system::is_error_code_enum<rig::asio::errc> : std::true_type {};

// A bound handler keeps its handler's associations (Boost.Asio "Associated allocator").
template <class Handler, class Allocator>
struct boost::asio::associated_allocator<rig::asio::detail::bound_handler<Handler>, Allocator> {
    using type = associated_allocator_t<Handler, Allocator>;
    static type get(const rig::asio::detail::bound_handler<Handler>& b, const Allocator& a = Allocator()) noexcept {
        return associated_allocator<Handler, Allocator>::get(b.handler, a);
    }
};
template <class Handler, class Executor>
struct boost::asio::associated_executor<rig::asio::detail::bound_handler<Handler>, Executor> {
    using type = associated_executor_t<Handler, Executor>;
    static type get(const rig::asio::detail::bound_handler<Handler>& b, const Executor& e = Executor()) noexcept {
        return associated_executor<Handler, Executor>::get(b.handler, e);
    }
};
/// @endcond

#include "rig/asio_impl.hpp"   // the definitions: the adapter is headers only
