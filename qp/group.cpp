// completion_group: the NIC's group calls (make, destroy, a queue pair in a group, the wake-up of
// its sleepers) and the group's poll, arm and wait over the family's side (qp/group_state.hpp).
#include "rig/group.hpp"

#include "qp/state.hpp"  // first of the internal headers: see qp/mlx5/data_path.hpp
#include "qp/group_state.hpp"
#include "qp/nic_state.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <string>
#include <utility>
#include <vector>

#include "qp/control.hpp"
#include "rig/nic.hpp"

namespace rig {

// ---- the NIC's side -----------------------------------------------------------------------------

result<completion_group> nic::make_group(const group_options& options) {
    std::lock_guard g(_s->lock);
    if (_s->closed) {
        misuse("make_group: the NIC is closed");
    }
    if (options.entries == 0) {
        misuse("make_group: a CQ of 0 entries");
    }
    const std::uint8_t log_max = _s->control->log_max_cq();
    if (options.entries > (std::uint64_t{1} << log_max)) {
        misuse("make_group: " + std::to_string(options.entries) + " entries is over the NIC's largest CQ of 2^" +
               std::to_string(log_max));
    }
    auto s = std::make_unique<detail::group_state>();
    s->entries = std::bit_ceil(options.entries);
    s->log_ring = std::min(options.log_ring_entries, _s->control->log_max_ring());
    if (auto r = _s->control->make_group(*s); !r) {
        return std::unexpected(detail::named("make_group", std::move(r.error())));
    }
    {
        std::lock_guard e(_s->event_lock);
        _s->live_groups.push_back(s.get());
    }
    _s->groups.push_back(std::move(s));
    return completion_group(this, _s->groups.back().get());
}

result<queue_pair> nic::make_qp(completion_group& group) {
    std::lock_guard g(_s->lock);
    if (_s->closed) {
        misuse("make_qp: the NIC is closed");
    }
    detail::group_state& s = group.live("make_qp");
    if (group._nic != this) {
        misuse("make_qp: the completion group is not one of this NIC");
    }
    const std::uint32_t rings = 2u << s.log_ring;
    {
        std::lock_guard m(s.lock);
        if (s.reserved + rings > s.entries) {
            misuse("make_qp: the group's CQ of " + std::to_string(s.entries) + " entries has room for " +
                   std::to_string(s.entries - s.reserved) + " more ring entries, a queue pair's rings take " +
                   std::to_string(rings));
        }
    }
    return add_qp(std::make_unique<detail::qp_state>(), s.log_ring, &s);
}

result<void> nic::destroy(detail::group_state& s) {
    std::lock_guard g(_s->lock);
    if (s.destroyed) {
        misuse("destroy: the completion group is already destroyed");
    }
    {
        std::lock_guard m(s.lock);
        if (!s.members.empty()) {
            misuse("destroy: the completion group still has " + std::to_string(s.members.size()) +
                   " live queue pair(s): destroy them first");
        }
    }
    s.destroyed = true;
    if (_s->closed) {
        return {};
    }
    return release_group(s);
}

result<void> nic::release_group(detail::group_state& s) {
    {
        std::lock_guard e(_s->event_lock);
        std::erase(_s->live_groups, &s);
    }
    if (auto r = _s->control->release_group(s); !r) {
        return std::unexpected(detail::named("destroy (completion group)", std::move(r.error())));
    }
    return {};
}

// From the event thread: a member failed, or the NIC did. The eventfd is the group's vector's;
// writing it is what the vector's interrupt does (a sleeper on it wakes, then polls).
void nic::wake_group(detail::group_state& s) {
    s.settle.store(true, std::memory_order_release);
    if (s.event_fd >= 0) {
        const std::uint64_t one = 1;
        static_cast<void>(::write(s.event_fd, &one, sizeof one));
    }
}

// ---- the handle -----------------------------------------------------------------------------------

detail::group_state& completion_group::live(const char* call) const {
    if (_state == nullptr) {
        misuse(std::string(call) + ": an empty completion group");
    }
    if (_state->destroyed) {
        misuse(std::string(call) + ": the completion group is destroyed");
    }
    return *_state;
}

std::uint32_t completion_group::number() const { return live("number").cq; }
std::uint32_t completion_group::entries() const { return live("entries").entries; }
bool completion_group::destroyed() const noexcept { return _state == nullptr || _state->destroyed; }
int completion_group::native_handle() const { return live("native_handle").event_fd; }

std::size_t completion_group::queue_pairs() const {
    detail::group_state& s = live("queue_pairs");
    std::lock_guard m(s.lock);
    return s.members.size();
}

result<void> completion_group::destroy() { return _nic->destroy(live("destroy")); }

namespace {

// Whether ring `send` of `s` has results due and is not yet in the ready list: then it goes in.
template <class Path>
void queue_if_due(detail::group_state& g, detail::qp_state& s, const Path& p, bool send) {
    bool& queued = s.queued[send ? 0 : 1];
    if (!queued && p.entries(send).due()) {
        queued = true;
        g.ready.emplace_back(&s, send);
    }
}

// One result of ring `send` as a completion (the entry just taken is the ring's taken() - 1).
template <class Path>
void fill(completion& out, const detail::qp_state& s, const Path& p, bool send, const qp::entry_result& r) {
    const qp::ring& ring = p.entries(send);
    const qp::entry_label& label = ring.label_of(ring.taken() - 1);
    out.qp = s.number;
    out.ring = send ? side::send : side::receive;
    out.op = label.op;
    out.tag = label.tag;
    if (r) {
        out.bytes = *r;
        out.immediate = label.has_immediate ? std::optional(label.immediate) : std::nullopt;
        out.failure.reset();
    } else {
        out.bytes = 0;
        out.immediate.reset();
        out.failure = detail::entry_failure(out.ring, r.error());
    }
}

// Ring `send` of `s`: its due results into out[n..] while there is room; returns the new n.
template <class Path>
std::size_t take_results(const detail::qp_state& s, Path& p, bool send, std::span<completion> out, std::size_t n) {
    while (n < out.size()) {
        std::optional<qp::entry_result> r = p.take(send);
        if (!r) {
            break;
        }
        fill(out[n++], s, p, send, *r);
    }
    return n;
}

// The ready rings' results into out[n..]; returns the new n. A ring leaves the list once it has
// nothing due; one whose results did not all fit stays first for the next poll.
template <class Member>
std::size_t take_ready(detail::group_state& g, std::span<completion> out, std::size_t n) {
    while (g.ready_head < g.ready.size() && n < out.size()) {
        auto [s, send] = g.ready[g.ready_head];
        if (s == nullptr) {  // destroyed since it was queued
            ++g.ready_head;
            continue;
        }
        auto& p = std::get<Member>(s->path);
        n = take_results(*s, p, send, out, n);
        if (p.entries(send).due()) {
            break;  // out is full
        }
        s->queued[send ? 0 : 1] = false;
        ++g.ready_head;
    }
    if (g.ready_head == g.ready.size()) {
        g.ready.clear();
        g.ready_head = 0;
    }
    return n;
}

// The failures the event thread had reported when a drain began (qp::reported_event: read before
// the drain, so a member that fails mid-drain keeps the CQEs the drain missed for the next poll,
// whose settle its wake_group asked for). Rare: only a poll that heard of a failure reads these.
using reported_failures = std::vector<std::pair<detail::qp_state*, std::uint8_t>>;
reported_failures failures_reported(detail::group_state& g) {
    reported_failures r;
    for (auto& [qpn, s] : g.members) {
        if (const std::uint8_t event = qp::reported_event(s->nic_event); event != 0) {
            r.emplace_back(s, event);
        }
    }
    return r;
}

// Those failures (or the NIC's) taken in by every member.
template <class Member>
void settle_members(detail::group_state& g, const reported_failures& reported, bool machine_failed) {
    for (const auto& [s, event] : reported) {
        std::get<Member>(s->path).settle(event, false);   // the machine's failure: below
    }
    for (auto& [qpn, s] : g.members) {
        auto& p = std::get<Member>(s->path);
        p.settle(0, machine_failed);
        queue_if_due(g, *s, p, true);
        queue_if_due(g, *s, p, false);
    }
}

// take_results, and what does not fit waits in the ready list (only ever when out is full).
template <class Path>
std::size_t take_ring(detail::group_state& g, detail::qp_state& s, Path& p, bool send, std::span<completion> out,
                      std::size_t n) {
    n = take_results(s, p, send, out, n);
    queue_if_due(g, s, p, send);
    return n;
}

// The CQEs into their rings and out, then (when the event thread reported a failure before the
// drain began, and the drain reached the CQ's end) the failures: as the per-queue-pair poll, the
// NIC's reports are read before the drain, so the CQEs it wrote before them keep their results.
template <class Group>
std::size_t drain(detail::group_state& g, Group& gp, std::span<completion> out, bool machine_failed) {
    using member = typename Group::member_path;
    // Acquire: the CQEs the NIC wrote before its report are seen by the drain below.
    const bool settle_due = g.settle.exchange(false, std::memory_order_acquire);
    reported_failures reported;
    if (settle_due) [[unlikely]] {
        reported = failures_reported(g);
    }
    std::size_t n = take_ready<member>(g, out, 0);
    // From here the ready list is empty (take_ready left room only once it emptied it), so a
    // CQE's ring gives its results straight into out.
    typename Group::cqe c;
    detail::qp_state* last = nullptr;   // consecutive CQEs often name one queue pair
    bool reached_end = false;
    while (n < out.size()) {
        if (!gp.next(c)) {
            reached_end = true;
            break;
        }
        const auto key = Group::qp_of(c);
        if (last == nullptr || last->group_key != key) {
            const auto it = g.members.find(key);
            if (it == g.members.end()) [[unlikely]] {
                continue;   // a queue pair destroyed since the NIC wrote it: no one's
            }
            last = it->second;
        }
        detail::qp_state& s = *last;
        auto& p = std::get<member>(s.path);
        Group::route(p, c);
        p.spread();
        n = take_ring(g, s, p, true, out, n);
        n = take_ring(g, s, p, false, out, n);
    }
    gp.done();
    if (settle_due) [[unlikely]] {
        if (!reached_end) {
            g.settle.store(true, std::memory_order_relaxed);   // out is full: the next poll settles
            return n;
        }
        settle_members<member>(g, reported, machine_failed);
        n = take_ready<member>(g, out, n);
    }
    return n;
}

}  // namespace

std::size_t completion_group::poll(std::span<completion> out) {
    detail::group_state& s = live("poll");
    std::lock_guard m(s.lock);
    const bool machine_failed = _nic->machine_failed();
    return detail::on_group(s, [&](auto& gp) { return drain(s, gp, out, machine_failed); });
}

void completion_group::arm() {
    detail::group_state& s = live("arm");
    std::lock_guard m(s.lock);
    detail::on_group(s, [](auto& gp) { gp.arm(); });
}

std::size_t completion_group::wait(std::span<completion> out, std::chrono::microseconds bound) {
    if (bound.count() < 0) {
        misuse("wait: a negative bound of " + std::to_string(bound.count()) + " us");
    }
    using clock = std::chrono::steady_clock;
    const auto end = clock::now() + bound;
    const auto slice = _nic->wait_look_interval();
    for (;;) {
        if (std::size_t n = poll(out)) {
            return n;
        }
        arm();
        if (std::size_t n = poll(out)) {
            return n;
        }
        const auto now = clock::now();
        if (now >= end) {
            return 0;
        }
        const auto sleep = std::chrono::ceil<std::chrono::milliseconds>(std::min<clock::duration>(end - now, slice));
        pollfd p{native_handle(), POLLIN, 0};
        static_cast<void>(::poll(&p, 1, static_cast<int>(sleep.count())));
    }
}

}  // namespace rig
