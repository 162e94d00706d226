// queue_pair: the misuse checks of the seed, then the mlx5 data path (qp/mlx5/*_queue.hpp).
#include "qp/qp.hpp"

#include <stdexcept>
#include <string>
#include <algorithm>
#include <atomic>

#include "qp/mlx5/qp_state.hpp"  // first: see its comment
#include "abi/bits.hpp"
#include "abi/mlx5/entry.hpp"
#include "qp/nic.hpp"

namespace rig {

namespace mabi = ::rig::mlx5::abi;

namespace {

void check_length(std::size_t n, const char* call) {
    // 2^31 itself is one message: abi's typed writers make it two data segments (entry.hpp)
    if (n > static_cast<std::size_t>(mabi::max_message)) [[unlikely]] {
        misuse(std::string(call) + ": " + std::to_string(n) + " bytes is over 2^31 (one message)");
    }
}

// An entry's error as the API's error. Only on a failure: the message is built here.
[[gnu::cold]] error entry_failure(side s, const qp::entry_error& e) {
    std::string m = s == side::send ? "send ring entry" : "receive ring entry";
    m += e.flushed ? " flushed, the queue pair had failed: " : " failed: ";
    m += e.what;
    if (e.syndrome != 0) {
        m += " (syndrome " + abi::hex(e.syndrome) + ", vendor " + abi::hex(e.vendor) + ")";
    }
    return error{std::move(m), error_kind::entry, std::nullopt, std::nullopt, e.syndrome, e.flushed};
}

}  // namespace

// ---- state and checks ---------------------------------------------------------------------------

detail::qp_state& queue_pair::live(const char* call) const {
    if (_state == nullptr) {
        misuse(std::string(call) + ": an empty queue pair");
    }
    if (_state->destroyed) {
        misuse(std::string(call) + ": the queue pair is destroyed");
    }
    return *_state;
}

detail::qp_state& queue_pair::ready(const char* call) const {
    detail::qp_state& s = live(call);
    if (!s.connected) [[unlikely]] {
        misuse(std::string(call) + ": the queue pair is not connected");
    }
    return s;
}

void queue_pair::check_local(const region& r, std::size_t at, std::size_t n, const char* call) const {
    if (r._nic != _nic || r._state == nullptr) [[unlikely]] {
        misuse(std::string(call) + ": the region is not one of this queue pair's NIC");
    }
    if (!r._state->registered) [[unlikely]] {
        misuse(std::string(call) + ": the region is deregistered");
    }
    check_length(n, call);
    if (at > r._state->bytes || n > r._state->bytes - at) [[unlikely]] {
        misuse(std::string(call) + ": bytes " + std::to_string(at) + " + " + std::to_string(n) +
               " do not lie in the region's " + std::to_string(r._state->bytes));
    }
}

endpoint queue_pair::local() const {
    const detail::qp_state& s = live("local");
    endpoint e;
    e.qp = s.object.qpn();
    e.psn = s.psn;
    e.gid = _nic->gid();
    e.mac = _nic->mac();
    return e;
}

std::uint32_t queue_pair::number() const { return live("number").object.qpn(); }
bool queue_pair::connected() const { return live("connected").connected; }
bool queue_pair::destroyed() const noexcept { return _state == nullptr || _state->destroyed; }

result<void> queue_pair::connect(const endpoint& e) {
    return _nic->connect(live("connect"), e, _nic->path_mtu());
}

result<void> queue_pair::connect(const endpoint& e, std::uint32_t path_mtu_bytes) {
    return _nic->connect(live("connect"), e, path_mtu_bytes);
}

result<void> queue_pair::destroy() {
    return _nic->destroy(live("destroy"));
}

result<firmware::mlx5::qp_state_info> queue_pair::query() const {
    return _nic->query(live("query"));
}

// ---- posting ---------------------------------------------------------------------------------

static mabi::local local_of(const detail::region_state& r, std::size_t at, std::size_t n) {
    return {static_cast<std::int64_t>(r.iova + at), static_cast<std::int64_t>(n),
            static_cast<std::int64_t>(r.key.lkey())};
}
static mabi::remote remote_of(const remote& to) {
    return {static_cast<std::int64_t>(to.address), static_cast<std::int64_t>(to.key)};
}
static void check_remote(const remote& to, const char* call) {
    if (to.address > static_cast<std::uint64_t>(INT64_MAX)) [[unlikely]] {
        misuse(std::string(call) + ": remote address " + abi::hex(to.address) + " is out of range");
    }
}

void queue_pair::post_send(const region& r, std::size_t at, std::size_t n) {
    detail::qp_state& s = ready("send");
    check_local(r, at, n, "send");
    s.sq->post(mabi::send_op{local_of(*r._state, at, n)}, true);
}

void queue_pair::post_receive(const region& r, std::size_t at, std::size_t n) {
    detail::qp_state& s = ready("receive");
    check_local(r, at, n, "receive");
    s.rq->post(local_of(*r._state, at, n));
}

void queue_pair::post_write(const region& r, std::size_t at, std::size_t n, const remote& to) {
    detail::qp_state& s = ready("write");
    check_local(r, at, n, "write");
    check_remote(to, "write");
    s.sq->post(mabi::write_op{local_of(*r._state, at, n), remote_of(to)}, true);
}

void queue_pair::post_write_inline(std::span<const std::byte> bytes, const remote& to) {
    detail::qp_state& s = ready("write_inline");
    if (bytes.size() > mabi::max_inline) [[unlikely]] {
        misuse("write_inline: " + std::to_string(bytes.size()) + " bytes is over the " +
               std::to_string(mabi::max_inline) + " one entry holds");
    }
    check_remote(to, "write_inline");
    const std::string_view data(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    s.sq->post(mabi::write_inline_op{data, remote_of(to)}, true);
}

void queue_pair::post_read(const remote& from, const region& r, std::size_t at, std::size_t n) {
    detail::qp_state& s = ready("read");
    check_local(r, at, n, "read");
    check_remote(from, "read");
    s.sq->post(mabi::read_op{remote_of(from), local_of(*r._state, at, n)}, true);
}

void queue_pair::ring(side sd) {
    detail::qp_state& s = ready("ring");
    if (sd == side::send) {
        s.sq->ring();
    } else {
        s.rq->ring();
    }
}

void queue_pair::send(const region& r, std::size_t at, std::size_t n) {
    post_send(r, at, n);
    _state->sq->ring();
}
void queue_pair::receive(const region& r, std::size_t at, std::size_t n) {
    post_receive(r, at, n);
    _state->rq->ring();
}
void queue_pair::write(const region& r, std::size_t at, std::size_t n, const remote& to) {
    post_write(r, at, n, to);
    _state->sq->ring();
}
void queue_pair::write_inline(std::span<const std::byte> bytes, const remote& to) {
    post_write_inline(bytes, to);
    _state->sq->ring();
}
void queue_pair::read(const remote& from, const region& r, std::size_t at, std::size_t n) {
    post_read(from, r, at, n);
    _state->sq->ring();
}

// ---- completions -------------------------------------------------------------------------------

std::uint32_t queue_pair::room(side sd) const {
    const detail::qp_state& s = live("room");
    return sd == side::send ? s.sq->room() : s.rq->room();
}

namespace {

// Takes in every CQE the NIC wrote for either ring, then spreads a failure: a queue pair fails
// as a whole, so once one ring failed the other's entries without a result fail too (seed: "the
// NIC then runs none of its entries that have no completion, of either ring").
// The failure the NIC reported by event, as its entries carry it.
[[gnu::cold]] qp::entry_error reported_failure(std::uint8_t event_type) noexcept {
    using t = ::rig::mlx5::ifc::event_type;
    switch (static_cast<t>(event_type)) {
    case t::wq_catas_error: return {"the NIC reported the queue pair's failure: WQ_CATAS_ERROR", event_type, 0, true};
    case t::wq_inval_req_error:
        return {"the NIC reported the queue pair's failure: WQ_INVAL_REQ_ERROR", event_type, 0, true};
    case t::wq_access_error:
        return {"the NIC reported the queue pair's failure: WQ_ACCESS_ERROR", event_type, 0, true};
    default: return {"the NIC reported the queue pair's failure: PATH_MIG_FAILED", event_type, 0, true};
    }
}

// The queue pair failed with `e`: a ring not yet failed fails with it, one failed only by the
// NIC's flushes takes it as the error its remaining entries carry.
template <class Queue>
void failed_from_outside(Queue& q, const qp::entry_error& e) noexcept {
    q.fail(e);
    q.adopt_failure(e);
}

void take_completions(detail::qp_state& s, bool machine_failed) noexcept {
    mabi::completion c;
    const std::uint32_t qpn = s.object.qpn();
    while (s.scq->poll(c)) {
        if (c.qpn != qpn || !qp::mlx5::is_send_side(c.opcode) || c.error == mabi::cqe_error::unknown) {
            s.sq->fail(qp::mlx5::unexpected_completion());   // a kind this ring does not take
        } else {
            s.sq->complete(c);
        }
    }
    while (s.rcq->poll(c)) {
        if (c.qpn != qpn || qp::mlx5::is_send_side(c.opcode)) {
            s.rq->fail(qp::mlx5::unexpected_completion());
        } else {
            s.rq->complete(c);
        }
    }
    // After every CQE the NIC wrote: a failure it reported by event, or its own failure.
    if (const std::uint8_t event = s.nic_event.load(std::memory_order_relaxed); event != 0) [[unlikely]] {
        failed_from_outside(*s.sq, reported_failure(event));
        failed_from_outside(*s.rq, reported_failure(event));
    } else if (machine_failed) [[unlikely]] {
        const qp::entry_error dead{"the NIC failed (fatal health report or internal error)", 0, 0, true};
        failed_from_outside(*s.sq, dead);
        failed_from_outside(*s.rq, dead);
    }
    // A queue pair fails as a whole: the ring whose entry failed itself gives its failure to the
    // other, which may so far hold only the NIC's flush CQEs (syndrome 0x5, taken in whichever
    // CQ was polled first) or nothing at all.
    const qp::ring& send = s.sq->entries();
    const qp::ring& receive = s.rq->entries();
    if (send.failed_itself() && !receive.failed_itself()) {
        failed_from_outside(*s.rq, send.failure());
    } else if (receive.failed_itself() && !send.failed_itself()) {
        failed_from_outside(*s.sq, receive.failure());
    } else if (send.failed() && !receive.failed()) {
        s.rq->fail(send.failure());
    } else if (receive.failed() && !send.failed()) {
        s.sq->fail(receive.failure());
    }
}

}  // namespace

std::optional<result<std::uint32_t>> queue_pair::poll(side sd) {
    detail::qp_state& s = live("poll");
    take_completions(s, _nic->machine_failed());
    std::optional<qp::entry_result> r = sd == side::send ? s.sq->poll() : s.rq->poll();
    if (!r) {
        return std::nullopt;
    }
    if (*r) {
        return result<std::uint32_t>{**r};
    }
    return result<std::uint32_t>{std::unexpect, entry_failure(sd, r->error())};
}

std::optional<result<std::uint32_t>> queue_pair::wait(side sd, std::chrono::microseconds bound) {
    detail::qp_state& s = live("wait");
    if (bound.count() < 0) {
        misuse("wait: a negative bound of " + std::to_string(bound.count()) + " us");
    }
    const qp::ring& ring = sd == side::send ? s.sq->entries() : s.rq->entries();
    if (ring.taken() == ring.posted()) {
        misuse("wait: no entry of the ring is due");
    }
    using clock = std::chrono::steady_clock;
    const auto end = clock::now() + bound;
    // A short spin (a completion often arrives within microseconds), then sleep until the CQ's
    // completion event: arm the CQ (a doorbell, no firmware request: reference mlx5.md §4.6),
    // look once more (for a CQE written between the last look and the arm; the NIC also raises
    // the event at once when armed with a CQE past the consumer index), then sleep. Each sleep
    // is capped (nic_options::wait_look_interval, 10 ms): a lost event costs one more look,
    // never the whole bound.
    constexpr auto spin = std::chrono::microseconds(20);
    const auto slice = _nic->wait_look_interval();
    const auto spin_end = clock::now() + spin;
    while (clock::now() < spin_end) {
        if (auto r = poll(sd)) {
            return r;
        }
    }
    qp::mlx5::completion_queue& cq = sd == side::send ? *s.scq : *s.rcq;
    const std::atomic<std::uint32_t>& events = sd == side::send ? s.send_events : s.receive_events;
    std::uint32_t& seen = sd == side::send ? s.send_events_seen : s.receive_events_seen;
    for (;;) {
        // every event taken in moves the arm sequence number on (rdma-core mlx5_cq_event)
        for (const std::uint32_t n = events.load(std::memory_order_acquire); seen != n; ++seen) {
            cq.event();
        }
        cq.arm();
        if (auto r = poll(sd)) {
            return r;
        }
        const auto now = clock::now();
        if (now >= end) {
            return std::nullopt;
        }
        _nic->sleep_until_event(events, seen, std::min<clock::duration>(end - now, slice));
        if (auto r = poll(sd)) {
            return r;
        }
    }
}

}  // namespace rig
