#pragma once
// The Boost.Asio adapter's implementation (rig/asio.hpp includes it at its end; not a header to
// include on its own): the adapter is headers only, so a program that does not use Asio needs no
// Boost and one that does needs only Boost's headers. Here: the error category, the slot table
// the adapter's tags name, the queue pairs it made, and the loop on the group's eventfd: drain,
// arm, drain, wait (rig/group.hpp).
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/system_error.hpp>

#include "rig/asio.hpp"
#include "rig/endpoint.hpp"
#include "rig/nic.hpp"

namespace rig::asio {

namespace detail {

class rig_category final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "rig"; }
    std::string message(int v) const override {
        switch (static_cast<errc>(v)) {
        case errc::os: return "the OS refused";
        case errc::firmware: return "the firmware refused";
        case errc::entry: return "the work entry failed";
        case errc::flushed: return "flushed: its queue pair had failed";
        case errc::aborted: return "aborted: completed by the adapter's close or destroy";
        }
        return "rig error " + std::to_string(v);
    }
};

}  // namespace detail

// One category object for the program: a function-local static of an inline function is one
// object across translation units ([dcl.inline]/6, [basic.def.odr]).
inline const boost::system::error_category& category() noexcept {
    static const detail::rig_category c;
    return c;
}

inline boost::system::error_code code_of(const rig::error& e) noexcept {
    switch (e.kind) {
    case error_kind::os: return errc::os;
    case error_kind::firmware: return errc::firmware;
    case error_kind::entry: return e.flushed ? errc::flushed : errc::entry;
    }
    return errc::entry;
}

namespace detail {

class core : public std::enable_shared_from_this<core> {
public:
    core(boost::asio::any_io_executor ex, completion_group& g, int fd, const options& o)
        : _ex(ex), _group(g), _events(ex, fd), _look(ex), _options(o) {}

    boost::asio::any_io_executor _ex;
    completion_group& _group;
    boost::asio::posix::stream_descriptor _events;   // the dup of the group's eventfd
    boost::asio::steady_timer _look;
    options _options;

    // A tag is (generation << 32) | index: a slot freed and taken again has a new generation, so
    // a completion never finds an operation it is not for.
    struct slot {
        pending_op* op = nullptr;               // attached handler (the token applied)
        std::uint32_t generation = 0;
        std::uint32_t qp = 0;
        side ring = side::send;
        operation op_kind = operation::send;
        bool used = false;
        std::optional<completion> early;        // came before its handler attached
    };
    std::vector<slot> _slots;
    std::vector<std::uint32_t> _free;
    struct member {
        std::uint32_t psn;
        std::array<std::byte, 6> mac;
    };
    std::unordered_map<std::uint32_t, member> _members;   // the queue pairs it made, by number

    std::size_t _pending = 0;     // slots in use: handlers not yet completed
    std::size_t _in_flight = 0;   // entries posted whose completion has not come: what it waits for
    bool _closed = false;
    bool _pump_scheduled = false;
    bool _waiting = false;        // an async_wait on the eventfd outstanding
    bool _looking = false;        // the look timer armed
    std::uint64_t _wait_id = 0;   // a cancelled wait's handler (run later) knows it is stale
    std::uint64_t _look_id = 0;
    std::chrono::steady_clock::time_point _quiet_since{};
    std::array<completion, options::batch> _batch;

    slot* find(std::uint64_t tag) noexcept {
        const auto index = static_cast<std::uint32_t>(tag);
        if (index >= _slots.size() || !_slots[index].used || _slots[index].generation != tag >> 32) {
            return nullptr;
        }
        return &_slots[index];
    }
    void release(slot& s) noexcept {
        s.used = false;
        s.op = nullptr;
        s.early.reset();
        ++s.generation;
        _free.push_back(static_cast<std::uint32_t>(&s - _slots.data()));
        --_pending;
    }
    // The slot's handler completed (posted) with `c`, or kept for it until it attaches.
    void complete(slot& s, const boost::system::error_code& code, completion&& c) {
        if (s.op == nullptr) {
            s.early = std::move(c);
            return;
        }
        pending_op* op = s.op;
        release(s);
        op->finish(op, code, std::move(c));
    }

    void deliver(completion& c);
    std::size_t drain();
    void pump();
    void schedule_pump();
    void wait();
    void stop_waiting();
    void abort(slot& s);
    void abort_all(std::optional<std::uint32_t> qpn = std::nullopt);
};

// A completion the group handed out, to its slot's handler. Another tag (a post not made through
// the adapter, or a slot aborted by destroy) is no one's.
inline void core::deliver(completion& c) {
    slot* s = find(c.tag);
    if (s == nullptr || s->early) {
        return;
    }
    --_in_flight;
    const boost::system::error_code code = code_of(c);
    complete(*s, code, std::move(c));
}

// poll() until it gives 0; how many it gave.
inline std::size_t core::drain() {
    std::size_t total = 0;
    while (!_closed) {
        const std::size_t n = _group.poll(_batch);
        for (std::size_t i = 0; i < n; ++i) {
            deliver(_batch[i]);
        }
        total += n;
        if (n == 0) {
            break;
        }
    }
    return total;
}

// On the executor: drain; with entries still in flight, spin (options::spin) or drain-arm-drain
// and wait on the eventfd; with none, stop waiting (an idle adapter keeps no work).
inline void core::pump() {
    _pump_scheduled = false;
    if (_closed) {
        return;
    }
    if (_group.destroyed()) {   // its NIC was closed: no completion will come
        abort_all();
        return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (drain() > 0) {
        _quiet_since = now;
    }
    while (_in_flight > 0 && !_closed) {
        if (_options.spin.count() > 0 && now - _quiet_since < _options.spin) {
            schedule_pump();   // poll again after the executor's other handlers
            return;
        }
        _group.arm();
        if (drain() == 0) {
            wait();
            return;
        }
    }
    stop_waiting();
}

inline void core::schedule_pump() {
    if (_pump_scheduled || _closed) {
        return;
    }
    _pump_scheduled = true;
    boost::asio::post(_ex, [self = shared_from_this()] { self->pump(); });
}

// One async_wait on the eventfd and the look timer, unless they are outstanding already.
inline void core::wait() {
    if (!_waiting) {
        _waiting = true;
        _events.async_wait(boost::asio::posix::descriptor_base::wait_read,
                           [self = shared_from_this(), id = ++_wait_id](const boost::system::error_code& ec) {
                               if (id != self->_wait_id) {
                                   return;   // cancelled by stop_waiting (a later wait may be outstanding)
                               }
                               self->_waiting = false;
                               if (!ec) {
                                   self->pump();
                               }   // else a descriptor the reactor refuses: the look timer goes on
                           });
    }
    if (!_looking && _options.look_interval.count() > 0) {
        _looking = true;
        _look.expires_after(_options.look_interval);
        _look.async_wait([self = shared_from_this(), id = ++_look_id](const boost::system::error_code&) {
            if (id != self->_look_id) {
                return;
            }
            self->_looking = false;
            self->pump();
        });
    }
}

inline void core::stop_waiting() {
    if (_waiting) {
        _waiting = false;
        ++_wait_id;
        boost::system::error_code ignored;
        _events.cancel(ignored);
    }
    if (_looking) {
        _looking = false;
        ++_look_id;
        _look.cancel();
    }
}

// The slot's handler completed with aborted: a completion naming its queue pair, ring and
// operation, failed (a rig::error saying why, so that ok() is false), no bytes.
inline void core::abort(slot& s) {
    if (!s.early) {
        --_in_flight;
    }
    pending_op* op = s.op;
    completion c;
    c.qp = s.qp;
    c.ring = s.ring;
    c.op = s.op_kind;
    c.tag = (std::uint64_t{s.generation} << 32) | static_cast<std::uint32_t>(&s - _slots.data());
    release(s);   // a handler not attached yet finds no slot and is aborted when it attaches
    if (op != nullptr) {
        c.failure = plain_error(error_kind::entry, "asio::group: aborted by close or destroy, its result never taken");
        c.failure->flushed = true;
        op->finish(op, errc::aborted, std::move(c));
    }
}

// Every pending handler (of queue pair `qpn`, or of all) completed with aborted.
inline void core::abort_all(std::optional<std::uint32_t> qpn) {
    for (slot& s : _slots) {
        if (s.used && (!qpn || s.qp == *qpn)) {
            abort(s);
        }
    }
    if (_in_flight == 0) {
        stop_waiting();
    }
}

}  // namespace detail

// ---- the handle -------------------------------------------------------------------------------------

inline result<group> group::make(executor_type ex, completion_group& g, const options& o) {
    const int fd = g.native_handle();   // misuse if g is destroyed
    // The NIC owns its eventfd and stream_descriptor closes what it holds: a duplicate, not
    // inherited across exec as Rig's own descriptors are not.
    const int mine = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (mine < 0) {
        return std::unexpected(plain_error(error_kind::os, std::string("asio::group::make: dup of the group's "
                                                                       "eventfd: ") + std::strerror(errno)));
    }
    try {
        return group(std::make_shared<detail::core>(std::move(ex), g, mine, o));
    } catch (const boost::system::system_error& e) {   // the reactor refused the descriptor
        ::close(mine);
        return std::unexpected(plain_error(error_kind::os, std::string("asio::group::make: ") + e.what()));
    }
}

inline group& group::operator=(group&& o) noexcept {
    if (this != &o) {
        close();
        _core = std::move(o._core);
    }
    return *this;
}

inline group::~group() { close(); }

inline detail::core& group::live(const char* call) const {
    if (!_core) {
        misuse(std::string(call) + ": an empty asio::group");
    }
    if (_core->_closed) {
        misuse(std::string(call) + ": the asio::group is closed");
    }
    return *_core;
}

inline group::executor_type group::get_executor() const { return live("get_executor")._ex; }
inline group::executor_type group::executor_of(const detail::core& c) { return c._ex; }
inline bool group::closed() const noexcept { return !_core || _core->_closed; }
inline std::size_t group::pending() const noexcept { return _core ? _core->_pending : 0; }

inline result<queue_pair> group::make_qp(rig::nic& n) {
    detail::core& c = live("make_qp");
    result<queue_pair> q = n.make_qp(c._group);
    if (q) {
        const endpoint e = q->local();
        c._members[e.qp] = {e.psn, e.mac};
    }
    return q;
}

inline result<void> group::destroy(queue_pair& q) {
    detail::core& c = live("destroy");
    if (q.destroyed()) {
        misuse("destroy: the queue pair is destroyed");
    }
    const std::uint32_t qpn = member_of(c, q, "destroy");
    if (!c._group.destroyed()) {
        c.drain();   // what already completed completes with its own result
    }
    result<void> r = q.destroy();
    c._members.erase(qpn);
    c.abort_all(qpn);
    return r;
}

inline void group::close() {
    if (!_core || _core->_closed) {
        return;
    }
    _core->abort_all();
    _core->_closed = true;
    boost::system::error_code ignored;
    _core->_events.close(ignored);
}

inline std::uint32_t group::member_of(const detail::core& c, const queue_pair& q, const char* call) {
    // The queue pair handle names no group: the adapter knows the ones it made by number, first
    // PSN and MAC (another NIC's queue pair may have the same number).
    const endpoint e = q.local();   // misuse if q is empty or destroyed
    const auto it = c._members.find(e.qp);
    if (it == c._members.end() || it->second.psn != e.psn || it->second.mac != e.mac) {
        misuse(std::string(call) + ": queue pair " + std::to_string(e.qp) +
               " is not one this asio::group made (make it with its make_qp)");
    }
    return e.qp;
}

inline std::uint64_t group::begin(detail::core& c, const queue_pair& q, const char* call, side ring, operation op) {
    const std::uint32_t qpn = member_of(c, q, call);
    std::uint32_t index;
    if (!c._free.empty()) {
        index = c._free.back();
        c._free.pop_back();
    } else {
        index = static_cast<std::uint32_t>(c._slots.size());
        c._slots.emplace_back();
    }
    detail::core::slot& s = c._slots[index];
    s.used = true;
    s.qp = qpn;
    s.ring = ring;
    s.op_kind = op;
    ++c._pending;
    return (std::uint64_t{s.generation} << 32) | index;
}

inline void group::abandon(detail::core& c, std::uint64_t tag) noexcept {
    if (detail::core::slot* s = c.find(tag)) {
        c.release(*s);
    }
}

inline void group::posted(detail::core& c, std::uint64_t) {
    if (c._in_flight++ == 0) {
        c._quiet_since = std::chrono::steady_clock::now();
    }
    if (!c._waiting) {
        c.schedule_pump();   // never inline: the initiating call runs no handler
    }
}

inline void group::attach(detail::core& c, std::uint64_t tag, detail::pending_op* op) {
    detail::core::slot* s = c.find(tag);
    if (s == nullptr) {   // aborted by close or destroy before it was awaited
        completion none;
        op->finish(op, errc::aborted, std::move(none));
        return;
    }
    s->op = op;
    if (s->early) {
        completion done = std::move(*s->early);
        const boost::system::error_code code = code_of(done);
        c.release(*s);
        op->finish(op, code, std::move(done));
    }
}

}  // namespace rig::asio
