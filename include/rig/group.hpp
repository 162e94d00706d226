#pragma once
/// @file
/// A completion group: one completion queue that many queue pairs of a NIC complete to (both rings
/// of each), with an event queue of its own on its own MSI-X vector whose eventfd the group hands
/// out, for epoll, io_uring or Asio (the verbs shape: a CQ shared by QPs, a completion channel;
/// SPDK's poll groups).
///
/// @code
///   rig::completion_group g = nic->make_group({.entries = 1 << 16}).value();
///   rig::queue_pair q = nic->make_qp(g).value();            // both rings complete to g
///   q.connect(peer).value();
///   q.write(r, 0, 64, peer_region, /*tag=*/42);
///   std::array<rig::completion, 64> done;
///   std::size_t n = g.wait(done, 1ms);                      // done[0].tag == 42, .qp, .op, .bytes
/// @endcode
///
/// poll drains up to out.size() completions without a system call. Each ring's completions come
/// in the order of its entries (the seed's rule, as queue_pair::poll); rings interleave as their
/// completions arrived. A failed entry carries its error; the entries after it on both rings of
/// its queue pair complete flushed (error.flushed), as queue_pair::poll gives them.
///
/// Sleeping without losing a completion (drain-arm-drain, as ibv_req_notify_cq):
/// @code
///   for (;;) {
///       while (std::size_t n = g.poll(done)) { use(done, n); }
///       g.arm();                                 // the next completion raises the event
///       if (std::size_t n = g.poll(done)) { use(done, n); continue; }  // arrived before the arm
///       epoll_wait(...native_handle()...);       // readable once an event came after arm()
///   }
/// @endcode
/// wait() does this with poll(2) on the eventfd.
///
/// The CQ holds `entries` completions; make_qp(group) refuses a queue pair whose rings would let
/// more entries be outstanding than that (no CQ overrun is possible).
/// A queue pair of a group is polled through it: queue_pair::poll and wait on it are misuse.
/// Threads: poll, arm and wait from one thread at a time; make_qp(group) and destroy of its queue
/// pairs from any thread (they take the group's lock, as poll does).
#include "rig/config.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>

#include "rig/completion.hpp"
#include "rig/error.hpp"
#include "rig/handle.hpp"

namespace rig {

class nic;
namespace detail {
struct group_state;
}

/// What nic::make_group makes.
struct group_options {
    /// The CQ's size: completions it holds (rounded up to a power of two, at most the NIC's).
    std::uint32_t entries = 1u << 16;
    /// Each of its queue pairs' rings holds 2^log_ring_entries entries (capped as nic_options'
    /// log_ring_entries is).
    std::uint8_t log_ring_entries = 8;
};

/// One completion queue for many queue pairs of a NIC, with its eventfd (above). Moved, never
/// copied; a moved-from or default group is empty.
class RIG_API completion_group : private detail::handle<detail::group_state> {
public:
    completion_group() = default;
    /// Takes the other handle's group; that handle is left empty.
    completion_group(completion_group&&) noexcept = default;
    /// Takes the other handle's group; that handle is left empty (a group this one named stays
    /// the NIC's until its close()).
    completion_group& operator=(completion_group&&) noexcept = default;

    std::uint32_t number() const;        ///< its completion queue's number
    std::uint32_t entries() const;       ///< completions its CQ holds
    std::size_t queue_pairs() const;     ///< live queue pairs completing to it
    /// Whether destroy() was called (an empty handle counts as destroyed).
    bool destroyed() const noexcept;

    /// Up to out.size() completions, oldest first per ring; 0 when none is there. No system call.
    std::size_t poll(std::span<completion> out);
    /// Asks for an event at the next completion: takes in the events so far (the eventfd read to
    /// 0, the EQ's entries), re-arms the EQ and the CQ (a doorbell each, no command). Poll again
    /// after it before sleeping on native_handle().
    void arm();
    /// The group's MSI-X vector's eventfd (non-blocking; the NIC owns it): readable when an event
    /// came after arm(). The NIC also makes it readable when a queue pair of the group or the NIC
    /// itself fails, so that a sleeper wakes to poll the errors.
    int native_handle() const;
    /// poll, and if nothing is there, drain-arm-drain and sleep on the eventfd until completions
    /// come or `bound` passes (looking again at least every nic_options::wait_look_interval).
    /// Misuse: bound < 0.
    std::size_t wait(std::span<completion> out, std::chrono::microseconds bound);

    /// Destroys the CQ and the EQ. Misuse: destroyed already, or queue pairs of the group still
    /// live (destroy them first). Error if the firmware refuses: counts as destroyed all the same,
    /// its memory kept until the NIC's close().
    result<void> destroy();

private:
    friend class nic;
    completion_group(rig::nic* n, detail::group_state* s) noexcept : handle(n, s) {}
    detail::group_state& live(const char* call) const;
};

}  // namespace rig
