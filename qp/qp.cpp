// queue_pair: the misuse checks of the seed, then the family's data path (qp/state.hpp on_path:
// the variant's index, no virtual call; mlx5: qp/mlx5/data_path.hpp).
#include "rig/qp.hpp"

#include "qp/state.hpp"  // first of the internal headers: see qp/mlx5/data_path.hpp

#include <stdexcept>
#include <string>
#include <algorithm>
#include <atomic>

#include "abi/bits.hpp"
#include "rig/nic.hpp"

namespace rig {

namespace {

// One message is at most 2^31 bytes (the seed's limit; mlx5 describes 2^31 itself with two data
// segments, abi/mlx5/entry.hpp).
constexpr std::uint64_t max_message = std::uint64_t{1} << 31;
static_assert(qp::mlx5::data_path::max_message == max_message);
static_assert(qp::bnxt::data_path::max_message == max_message);

// The refusals build their messages out of line (cold, never inlined): the post calls keep a
// small frame and only their compares on the hot path (bench-post's queue_pair rows).
[[noreturn, gnu::cold, gnu::noinline]] void refuse_length(std::size_t n, const char* call) {
    misuse(std::string(call) + ": " + std::to_string(n) + " bytes is over 2^31 (one message)");
}

[[noreturn, gnu::cold, gnu::noinline]] void refuse_state(const char* call, const char* why) {
    misuse(std::string(call) + why);
}

[[noreturn, gnu::cold, gnu::noinline]] void refuse_region(const char* call, bool deregistered) {
    misuse(std::string(call) + (deregistered ? ": the region is deregistered"
                                             : ": the region is not one of this queue pair's NIC"));
}

[[noreturn, gnu::cold, gnu::noinline]] void refuse_bytes(const char* call, std::size_t at, std::size_t n,
                                                         std::size_t bytes) {
    misuse(std::string(call) + ": bytes " + std::to_string(at) + " + " + std::to_string(n) +
           " do not lie in the region's " + std::to_string(bytes));
}

// Entry i of a batch write refused: the first of its checks that fails, in the order the
// single-entry write checks them.
[[noreturn, gnu::cold, gnu::noinline]] void refuse_batch_entry(std::size_t i, const write_entry& e,
                                                               std::size_t bytes) {
    const std::string call = "write (batch), entry " + std::to_string(i);
    if (e.n > max_message) {
        refuse_length(e.n, call.c_str());
    }
    if (e.at > bytes || e.n > bytes - e.at) {
        refuse_bytes(call.c_str(), e.at, e.n, bytes);
    }
    misuse(call + ": remote address " + abi::hex(e.to.address) + " is out of range");
}

// Whether an entry of a batch write fails the single-entry write's checks, as one flag for the
// whole batch: no branch per entry, and the bytes <= region test bounds an entry's length by
// 2^31 already when the region is no larger (`Long` false), which leaves that compare out of
// the loop (bench-post's "qp batch" rows).
template <bool Long>
[[gnu::always_inline]] inline bool refused_entries(std::span<const write_entry> batch, std::size_t bytes) {
    bool bad = false;
    for (const write_entry& e : batch) {
        bad |= (e.at > bytes) | (e.n > bytes - e.at) | (e.to.address > static_cast<std::uint64_t>(INT64_MAX));
        if constexpr (Long) {
            bad |= e.n > max_message;
        }
    }
    return bad;
}

// The first refused entry of a batch, named by refuse_batch_entry.
[[noreturn, gnu::cold, gnu::noinline]] void refuse_batch(std::span<const write_entry> batch, std::size_t bytes) {
    for (std::size_t i = 0; i < batch.size(); ++i) {
        const write_entry& e = batch[i];
        if ((e.at > bytes) | (e.n > bytes - e.at) | (e.n > max_message) |
            (e.to.address > static_cast<std::uint64_t>(INT64_MAX))) {
            refuse_batch_entry(i, e, bytes);
        }
    }
    misuse("write (batch): refused_entries and refuse_batch disagree");
}

[[gnu::always_inline]] inline void check_length(std::size_t n, const char* call) {
    if (n > max_message) [[unlikely]] {
        refuse_length(n, call);
    }
}

}  // namespace

namespace detail {
// An entry's error as the API's error. Only on a failure: the message is built here.
error entry_failure(side s, const qp::entry_error& e) {
    std::string m = s == side::send ? "send ring entry" : "receive ring entry";
    m += e.flushed ? " flushed, the queue pair had failed: " : " failed: ";
    m += e.what;
    if (e.syndrome != 0) {
        m += " (syndrome " + abi::hex(e.syndrome) + ", vendor " + abi::hex(e.vendor) + ")";
    }
    error out = plain_error(error_kind::entry, std::move(m));
    out.syndrome = e.syndrome;
    out.flushed = e.flushed;
    return out;
}

}  // namespace detail

// ---- state and checks ---------------------------------------------------------------------------
// Always inlined into the post calls: with two families' data paths behind on_path, g++ stopped
// inlining them into queue_pair::post_write, and the three calls cost ~4 ns of ~12 per entry
// (bench-post's queue_pair rows, mlx5 at 32 per doorbell: 11.7 -> 7.7 ns/entry).

[[gnu::always_inline]] inline detail::qp_state& queue_pair::live(const char* call) const {
    if (_state == nullptr) [[unlikely]] {
        refuse_state(call, ": an empty queue pair");
    }
    if (_state->destroyed) [[unlikely]] {
        refuse_state(call, ": the queue pair is destroyed");
    }
    return *_state;
}

[[gnu::always_inline]] inline detail::qp_state& queue_pair::ready(const char* call) const {
    detail::qp_state& s = live(call);
    if (!s.connected) [[unlikely]] {
        refuse_state(call, ": the queue pair is not connected");
    }
    return s;
}

[[gnu::always_inline]] inline void queue_pair::check_local(const region& r, std::size_t at, std::size_t n, const char* call) const {
    check_region(r, call);
    check_length(n, call);
    if (at > r._state->bytes || n > r._state->bytes - at) [[unlikely]] {
        refuse_bytes(call, at, n, r._state->bytes);
    }
}

[[gnu::always_inline]] inline void queue_pair::check_region(const region& r, const char* call) const {
    if (r._nic != _nic || r._state == nullptr) [[unlikely]] {
        refuse_region(call, false);
    }
    if (!r._state->registered) [[unlikely]] {
        refuse_region(call, true);
    }
}

endpoint queue_pair::local() const {
    const detail::qp_state& s = live("local");
    endpoint e;
    e.qp = s.number;
    e.psn = s.psn;
    e.gid = _nic->gid();
    e.mac = _nic->mac();
    return e;
}

std::uint32_t queue_pair::number() const { return live("number").number; }
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

result<qp_info> queue_pair::query() const {
    return _nic->query(live("query"));
}

// ---- posting ---------------------------------------------------------------------------------

[[noreturn, gnu::cold, gnu::noinline]] static void refuse_remote(const remote& to, const char* call) {
    misuse(std::string(call) + ": remote address " + abi::hex(to.address) + " is out of range");
}

[[gnu::always_inline]] static inline void check_remote(const remote& to, const char* call) {
    if (to.address > static_cast<std::uint64_t>(INT64_MAX)) [[unlikely]] {
        refuse_remote(to, call);
    }
}

void queue_pair::post_send(const region& r, std::size_t at, std::size_t n, std::uint64_t tag, signaled sig) {
    detail::qp_state& s = ready("send");
    check_local(r, at, n, "send");
    const detail::region_state& m = *r._state;
    detail::on_path(s, [&](auto& p) { p.post_send(m.iova + at, n, m.key, tag, sig == signaled::yes); });
}

void queue_pair::post_receive(const region& r, std::size_t at, std::size_t n, std::uint64_t tag) {
    detail::qp_state& s = ready("receive");
    check_local(r, at, n, "receive");
    const detail::region_state& m = *r._state;
    detail::on_path(s, [&](auto& p) { p.post_receive(m.iova + at, n, m.key, tag); });
}

// The two WRITE posts start on a cache line: bench-post's queue_pair and qp batch rows moved by
// 0.3-0.4x with where the linker happened to put them after unrelated edits of this file (the
// same instructions at another 16-byte offset); aligned, they measure their own code.
[[gnu::aligned(64)]] void queue_pair::post_write(const region& r, std::size_t at, std::size_t n, const remote& to,
                            std::uint64_t tag, signaled sig) {
    detail::qp_state& s = ready("write");
    check_local(r, at, n, "write");
    check_remote(to, "write");
    const detail::region_state& m = *r._state;
    detail::on_path(s, [&](auto& p) { p.post_write(m.iova + at, n, m.key, to, tag, sig == signaled::yes); });
}

// The batch: every entry checked before any is written (so that neither this nor the family's
// writer refuses part-way), then the family's batch post, whose one check is the room for all.
[[gnu::aligned(64)]] void queue_pair::post_write(const region& r, std::span<const write_entry> batch) {
    constexpr const char* call = "write (batch)";
    detail::qp_state& s = ready(call);
    check_region(r, call);
    const detail::region_state& m = *r._state;
    if (batch.size() > max_message) [[unlikely]] {
        misuse(std::string(call) + ": " + std::to_string(batch.size()) + " entries is over any ring");
    }
    const std::size_t bytes = m.bytes;
    if (bytes <= max_message ? refused_entries<false>(batch, bytes) : refused_entries<true>(batch, bytes))
        [[unlikely]] {
        refuse_batch(batch, bytes);
    }
    detail::on_path(s, [&](auto& p) { p.post_writes(m.iova, m.key, batch); });
}

void queue_pair::post_send_imm(const region& r, std::size_t at, std::size_t n, std::uint32_t immediate,
                               std::uint64_t tag, signaled sig) {
    detail::qp_state& s = ready("send_imm");
    check_local(r, at, n, "send_imm");
    const detail::region_state& m = *r._state;
    detail::on_path(s, [&](auto& p) { p.post_send_imm(m.iova + at, n, m.key, immediate, tag, sig == signaled::yes); });
}

void queue_pair::post_write_imm(const region& r, std::size_t at, std::size_t n, const remote& to,
                                std::uint32_t immediate, std::uint64_t tag, signaled sig) {
    detail::qp_state& s = ready("write_imm");
    check_local(r, at, n, "write_imm");
    check_remote(to, "write_imm");
    const detail::region_state& m = *r._state;
    detail::on_path(s, [&](auto& p) {
        p.post_write_imm(m.iova + at, n, m.key, to, immediate, tag, sig == signaled::yes);
    });
}

void queue_pair::post_write_inline(std::span<const std::byte> bytes, const remote& to, std::uint64_t tag,
                                   signaled sig) {
    detail::qp_state& s = ready("write_inline");
    detail::on_path(s, [&](auto& p) {
        using path = std::remove_cvref_t<decltype(p)>;
        if (bytes.size() > path::max_inline) [[unlikely]] {
            misuse("write_inline: " + std::to_string(bytes.size()) + " bytes is over the " +
                   std::to_string(path::max_inline) + " one entry holds");
        }
        check_remote(to, "write_inline");
        p.post_write_inline(bytes, to, tag, sig == signaled::yes);
    });
}

void queue_pair::post_read(const remote& from, const region& r, std::size_t at, std::size_t n,
                           std::uint64_t tag, signaled sig) {
    detail::qp_state& s = ready("read");
    check_local(r, at, n, "read");
    check_remote(from, "read");
    const detail::region_state& m = *r._state;
    detail::on_path(s, [&](auto& p) { p.post_read(from, m.iova + at, n, m.key, tag, sig == signaled::yes); });
}

void queue_pair::post_read(const region& src, std::size_t i, const region& dst, std::size_t at, std::size_t n,
                           std::uint64_t tag, signaled sig) {
    const detail::qp_state& s = ready("read");
    check_local(src, i, n, "read (source)");
    if (s.peer.gid != _nic->gid() || s.peer.mac != _nic->mac() || !_nic->has_queue_pair(s.peer.qp)) [[unlikely]] {
        misuse("read: the queue pair's peer " + abi::hex(s.peer.qp) + " is not a queue pair of this NIC, which "
               "holds the source region");
    }
    post_read(src.remote(i), dst, at, n, tag, sig);
}

std::size_t queue_pair::max_inline() const {
    const detail::qp_state& s = live("max_inline");
    return detail::on_path(s, [](const auto& p) { return std::remove_cvref_t<decltype(p)>::max_inline; });
}

void queue_pair::ring(side sd) {
    detail::qp_state& s = ready("ring");
    detail::on_path(s, [&](auto& p) { p.ring(sd == side::send); });
}

namespace {
// The ring after a post that checked the queue pair: straight to the data path.
[[gnu::always_inline]] inline void ring_checked(detail::qp_state& s, bool send) {
    detail::on_path(s, [&](auto& p) { p.ring(send); });
}
}  // namespace

void queue_pair::send(const region& r, std::size_t at, std::size_t n, std::uint64_t tag, signaled sig) {
    post_send(r, at, n, tag, sig);
    ring_checked(*_state, true);
}
void queue_pair::receive(const region& r, std::size_t at, std::size_t n, std::uint64_t tag) {
    post_receive(r, at, n, tag);
    ring_checked(*_state, false);
}
void queue_pair::write(const region& r, std::size_t at, std::size_t n, const remote& to, std::uint64_t tag,
                       signaled sig) {
    post_write(r, at, n, to, tag, sig);
    ring_checked(*_state, true);
}
void queue_pair::send_imm(const region& r, std::size_t at, std::size_t n, std::uint32_t immediate, std::uint64_t tag,
                          signaled sig) {
    post_send_imm(r, at, n, immediate, tag, sig);
    ring_checked(*_state, true);
}
void queue_pair::write_imm(const region& r, std::size_t at, std::size_t n, const remote& to, std::uint32_t immediate,
                           std::uint64_t tag, signaled sig) {
    post_write_imm(r, at, n, to, immediate, tag, sig);
    ring_checked(*_state, true);
}
void queue_pair::write_inline(std::span<const std::byte> bytes, const remote& to, std::uint64_t tag,
                              signaled sig) {
    post_write_inline(bytes, to, tag, sig);
    ring_checked(*_state, true);
}
void queue_pair::read(const remote& from, const region& r, std::size_t at, std::size_t n, std::uint64_t tag,
                      signaled sig) {
    post_read(from, r, at, n, tag, sig);
    ring_checked(*_state, true);
}
void queue_pair::read(const region& src, std::size_t i, const region& dst, std::size_t at, std::size_t n,
                      std::uint64_t tag, signaled sig) {
    post_read(src, i, dst, at, n, tag, sig);
    ring_checked(*_state, true);
}
void queue_pair::write(const region& r, std::span<const write_entry> batch) {
    post_write(r, batch);
    ring_checked(*_state, true);
}

// ---- completions -------------------------------------------------------------------------------

std::uint32_t queue_pair::room(side sd) const {
    const detail::qp_state& s = live("room");
    return detail::on_path(s, [&](const auto& p) { return p.room(sd == side::send); });
}

std::optional<result<std::uint32_t>> queue_pair::poll(side sd) {
    detail::qp_state& s = live("poll");
    if (s.group != nullptr) [[unlikely]] {
        misuse("poll: the queue pair completes to a completion group: poll the group");
    }
    const bool machine_failed = _nic->machine_failed();
    std::optional<qp::entry_result> r = detail::on_path(s, [&](auto& p) {
        p.take_completions(s.nic_event, machine_failed);
        return p.take(sd == side::send);
    });
    if (!r) {
        return std::nullopt;
    }
    if (*r) {
        return result<std::uint32_t>{**r};
    }
    return result<std::uint32_t>{std::unexpect, detail::entry_failure(sd, r->error())};
}

std::optional<result<std::uint32_t>> queue_pair::wait(side sd, std::chrono::microseconds bound) {
    detail::qp_state& s = live("wait");
    if (s.group != nullptr) {
        misuse("wait: the queue pair completes to a completion group: wait on the group");
    }
    if (bound.count() < 0) {
        misuse("wait: a negative bound of " + std::to_string(bound.count()) + " us");
    }
    const bool send = sd == side::send;
    const qp::ring& ring = detail::on_path(s, [&](auto& p) -> const qp::ring& { return p.entries(send); });
    if (ring.taken() == ring.posted()) {
        misuse("wait: no entry of the ring is due");
    }
    using clock = std::chrono::steady_clock;
    const auto end = clock::now() + bound;
    // A short spin (a completion often arrives within microseconds), then sleep until the CQ's
    // completion event: arm the CQ (a doorbell, no firmware request; mlx5: the kernel's
    // include/linux/mlx5/cq.h mlx5_cq_arm, rdma-core providers/mlx5/cq.c mlx5_arm_cq),
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
    const std::atomic<std::uint32_t>& events = sd == side::send ? s.send_events : s.receive_events;
    std::uint32_t& seen = sd == side::send ? s.send_events_seen : s.receive_events_seen;
    for (;;) {
        // every event taken in moves the arm sequence number on (rdma-core mlx5_cq_event)
        detail::on_path(s, [&](auto& p) {
            for (const std::uint32_t n = events.load(std::memory_order_acquire); seen != n; ++seen) {
                p.event(send);
            }
            p.arm(send);
        });
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
