#pragma once
// The mlx5 data path of one queue pair: its send and receive queues and their completion
// queues over the memory the control plane made (qp/mlx5/control.hpp), with the operations
// rig::queue_pair dispatches to (qp/state.hpp on_path: no virtual call). The arguments are the
// API's own (device addresses, lengths, keys); the mlx5 entry formats stay in here.
//
// abi/mlx5/ifc/*.hpp before the qp/mlx5 queues: the ifc headers name rig::abi as `abi` from
// inside rig::mlx5, which finds rig::mlx5::abi (abi/mlx5/entry.hpp, ...) once that is declared.
// Files that include this one include it before any abi/mlx5 data-path header.
#include "abi/mlx5/ifc/eqe.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "abi/mlx5/entry.hpp"
#include "qp/mlx5/completion_queue.hpp"
#include "qp/mlx5/receive_queue.hpp"
#include "qp/mlx5/send_queue.hpp"
#include "qp/failure.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"

namespace rig::qp::mlx5 {

struct data_path_memory {
    send_queue_memory send;
    receive_queue_memory receive;
    completion_queue_memory send_cq;
    completion_queue_memory receive_cq;
    std::uint32_t qpn = 0;
    std::uint32_t send_cqn = 0;
    std::uint32_t receive_cqn = 0;
};

// The failure the NIC reported for a queue pair by event (WQ_CATAS_ERROR, WQ_INVAL_REQ_ERROR,
// WQ_ACCESS_ERROR, PATH_MIG_FAILED), as its entries carry it; `event_type` is the EQE's type.
[[gnu::cold]] entry_error reported_failure(std::uint8_t event_type) noexcept;
// Is an event of this type a queue pair's failure (PATH_MIG, COMM_EST, SQ_DRAINED are not)?
bool is_failure_event(std::uint8_t event_type) noexcept;

class data_path {
public:
    explicit data_path(const data_path_memory& m)
        : sq(m.send, m.qpn), rq(m.receive), scq(m.send_cq, m.send_cqn), rcq(m.receive_cq, m.receive_cqn),
          qpn_(m.qpn) {}

    // What one entry takes (queue_pair's misuse checks).
    static constexpr std::size_t max_inline = abi::max_inline;
    static constexpr std::uint64_t max_message = static_cast<std::uint64_t>(abi::max_message);

    // `tag`: the caller's, handed back with the entry's completion by a completion group;
    // `signaled` false: no CQE for its success (ctrl fm_ce_se without CQ_UPDATE), the ring skips it.
    void post_send(std::uint64_t at, std::size_t n, std::uint32_t key, std::uint64_t tag, bool signaled = true) {
        sq.label(sq.post(abi::send_op{local(at, n, key)}, signaled), tag, rig::operation::send, signaled);
    }
    void post_receive(std::uint64_t at, std::size_t n, std::uint32_t key, std::uint64_t tag) {
        rq.label(rq.post(local(at, n, key)), tag, rig::operation::receive);
    }
    void post_write(std::uint64_t at, std::size_t n, std::uint32_t key, const rig::remote& to, std::uint64_t tag,
                    bool signaled = true) {
        sq.label(sq.post(abi::write_op{local(at, n, key), remote(to)}, signaled), tag, rig::operation::write, signaled);
    }
    // A batch of WRITEs from one region (device address `base`, key `key`), checked by the caller
    // (rig::queue_pair's batch write) so that abi refuses none: the room for all of them is the
    // only check left here (send_queue::post_batch).
    [[gnu::always_inline]] void post_writes(std::uint64_t base, std::uint32_t key,
                                            std::span<const rig::write_entry> b) {
        sq.post_batch(
            static_cast<std::uint32_t>(b.size()),
            [&](std::uint32_t i) { return abi::write_op{local(base + b[i].at, b[i].n, key), remote(b[i].to)}; },
            [&](std::uint32_t i) { return b[i].sig == rig::signaled::yes; },
            [&](std::uint32_t i, bool signaled, qp::entry_label& l) {
                qp::ring::set_label(l, b[i].tag, rig::operation::write, signaled);
            });
    }
    void post_write_inline(std::span<const std::byte> bytes, const rig::remote& to, std::uint64_t tag,
                           bool signaled = true) {
        const std::string_view data(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        sq.label(sq.post(abi::write_inline_op{data, remote(to)}, signaled), tag, rig::operation::write, signaled);
    }
    void post_write_imm(std::uint64_t at, std::size_t n, std::uint32_t key, const rig::remote& to, std::uint32_t imm,
                        std::uint64_t tag, bool signaled = true) {
        sq.label(sq.post(abi::write_imm_op{local(at, n, key), remote(to), imm}, signaled), tag,
                 rig::operation::write_imm, signaled);
    }
    void post_send_imm(std::uint64_t at, std::size_t n, std::uint32_t key, std::uint32_t imm, std::uint64_t tag,
                       bool signaled = true) {
        sq.label(sq.post(abi::send_imm_op{local(at, n, key), imm}, signaled), tag, rig::operation::send_imm, signaled);
    }
    void post_read(const rig::remote& from, std::uint64_t at, std::size_t n, std::uint32_t key, std::uint64_t tag,
                   bool signaled = true) {
        sq.label(sq.post(abi::read_op{remote(from), local(at, n, key)}, signaled), tag, rig::operation::read, signaled);
    }
    void ring(bool send) {
        if (send) {
            sq.ring();
        } else {
            rq.ring();
        }
    }
    std::uint32_t room(bool send) const noexcept { return send ? sq.room() : rq.room(); }
    const qp::ring& entries(bool send) const noexcept { return send ? sq.entries() : rq.entries(); }
    std::optional<entry_result> take(bool send) noexcept { return send ? sq.poll() : rq.poll(); }
    // wait(): the completion queue's arm doorbell and its event count (rdma-core mlx5_cq_event).
    void arm(bool send) noexcept { (send ? scq : rcq).arm(); }
    void event(bool send) noexcept { (send ? scq : rcq).event(); }

    // Takes in every CQE the NIC wrote for either ring, then spreads a failure: a queue pair
    // fails as a whole, so once one ring failed the other's entries without a result fail too
    // (seed: "the NIC then runs none of its entries that have no completion, of either ring").
    // `nic_event`: the failure event the NIC reported for the queue pair (0: none), read before
    // the CQEs (qp::reported_event: those the NIC wrote before its event keep their results).
    void take_completions(const std::atomic<std::uint8_t>& nic_event, bool machine_failed) noexcept {
        const std::uint8_t event = qp::reported_event(nic_event);
        abi::completion c;
        while (scq.poll(c)) {
            if (c.qpn != qpn_ || !is_send_side(c.opcode) || c.error == abi::cqe_error::unknown) {
                sq.fail(unexpected_completion());   // a kind this ring does not take
            } else {
                sq.complete(c);
            }
        }
        while (rcq.poll(c)) {
            if (c.qpn != qpn_ || is_send_side(c.opcode)) {
                rq.fail(unexpected_completion());
            } else {
                rq.complete(c);
            }
        }
        scq.done();   // each CQ's consumer index written once per drain
        rcq.done();
        settle(event, machine_failed);
    }

    // A CQE of a completion group's CQ (qp/mlx5/group_path.hpp) that names this queue pair: to
    // the ring its opcode says; a kind no ring takes fails the queue pair.
    void take_group_cqe(const abi::completion& c) noexcept {
        if (c.error == abi::cqe_error::unknown) [[unlikely]] {
            sq.fail(unexpected_completion());
        } else if (is_send_side(c.opcode)) {
            sq.complete(c);
        } else {
            rq.complete(c);
        }
    }
    // After a group routed a CQE here: a ring that failed itself fails the other too.
    void spread() noexcept { qp::spread_failure(sq, rq); }
    // After a group took in every CQE, having heard of a failure: as take_completions' end.
    void settle(std::uint8_t event, bool machine_failed) noexcept {
        qp::settle(sq, rq, event, machine_failed, reported_failure,
                   {"the NIC failed (fatal health report or internal error)", 0, 0, true});
    }

    send_queue sq;
    receive_queue rq;
    completion_queue scq;
    completion_queue rcq;

private:
    static abi::local local(std::uint64_t at, std::size_t n, std::uint32_t key) noexcept {
        return {static_cast<std::int64_t>(at), static_cast<std::int64_t>(n), static_cast<std::int64_t>(key)};
    }
    static abi::remote remote(const rig::remote& to) noexcept {
        return {static_cast<std::int64_t>(to.address), static_cast<std::int64_t>(to.key)};
    }
    std::uint32_t qpn_;
};

}  // namespace rig::qp::mlx5
