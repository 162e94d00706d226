#pragma once
// How a queue pair's failure spreads over its two rings, the same for every family: a queue
// pair fails as a whole (seed: "the NIC then runs none of its entries that have no completion,
// of either ring"). `Send` and `Receive` are a family's queues: entries() (qp/ring.hpp), fail(e)
// and adopt_failure(e). Hot path: a compare when nothing failed.
#include <atomic>
#include <cstdint>

#include "qp/ring.hpp"

namespace rig::qp {

// The queue pair failed from outside (the NIC reported it, or the NIC failed): a ring not yet
// failed fails with `e`; one failed only by the NIC's flushes takes `e` as the error its
// remaining entries carry.
template <class Send, class Receive>
[[gnu::cold]] void fail_both(Send& sq, Receive& rq, const entry_error& e) noexcept {
    sq.fail(e);
    sq.adopt_failure(e);
    rq.fail(e);
    rq.adopt_failure(e);
}

// The ring whose entry failed itself gives its failure to the other, which may so far hold only
// the NIC's flushes (mlx5's flush CQEs, taken in whichever CQ was polled first) or nothing at
// all (bnxt writes no flush CQEs: the other ring is flushed here, in software).
template <class Send, class Receive>
void spread_failure(Send& sq, Receive& rq) noexcept {
    const ring& send = sq.entries();
    const ring& receive = rq.entries();
    if (!send.failed() && !receive.failed()) [[likely]] {
        return;
    }
    if (send.failed_itself() && !receive.failed_itself()) {
        rq.fail(send.failure());
        rq.adopt_failure(send.failure());
    } else if (receive.failed_itself() && !send.failed_itself()) {
        sq.fail(receive.failure());
        sq.adopt_failure(receive.failure());
    } else if (send.failed() && !receive.failed()) {
        rq.fail(send.failure());
    } else if (receive.failed() && !send.failed()) {
        sq.fail(receive.failure());
    }
}

// After taking in every CQE the NIC wrote: the failure it reported for the queue pair by event
// (`event`, the family's code; 0: none; `reported(code)` is the error it gives the entries), or
// the NIC's own failure (`machine` the error); then the spread over both rings. The caller reads
// `event` (reported_event) *before* it drains the CQs: the NIC writes a failed entry's CQE before
// its event, so every CQE written before the event is then in the drain and keeps its own
// result. Read after the drain, an event that arrived mid-drain would flush an entry whose error
// CQE the drain had just missed (an entry failed for remote access came back flushed by
// QP_ERROR_NOTIFICATION).
[[gnu::always_inline]] inline std::uint8_t reported_event(const std::atomic<std::uint8_t>& nic_event) noexcept {
    return nic_event.load(std::memory_order_acquire);   // pairs with nic::on_qp_failure's release
}
template <class Send, class Receive, class Reported>
[[gnu::always_inline]] inline void settle(Send& sq, Receive& rq, std::uint8_t event, bool machine_failed,
                                          Reported reported, const entry_error& machine) noexcept {
    if (event != 0) [[unlikely]] {
        fail_both(sq, rq, reported(event));
    } else if (machine_failed) [[unlikely]] {
        fail_both(sq, rq, machine);
    }
    spread_failure(sq, rq);
}

}  // namespace rig::qp
