#pragma once
// The bnxt data path of one queue pair: its send and receive queues and their completion queues
// over the memory the control plane made (qp/bnxt/queue_memory.hpp), with the operations
// rig::queue_pair dispatches to (qp/state.hpp on_path: no virtual call). The arguments are the
// API's own (device addresses, lengths, keys); the bnxt entry formats stay in here.
//
// Failure (bnxt_re qplib_fp.c: the flush lists, __flush_sq / __flush_rq): the NIC writes no CQE
// per flushed entry. Once an entry failed
// (its error CQE), a TERMINAL CQE arrived, or the NIC reported the queue pair's failure (CREQ
// QP_ERROR_NOTIFICATION), the data path completes every entry of both rings that has no result
// as flushed itself, in entry order (qplib_fp.c __flush_sq, __flush_rq; rdma-core verbs.c
// bnxt_re_poll_flush_lists).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "abi/bnxt/cqe.hpp"
#include "abi/bnxt/wqe.hpp"
#include "qp/bnxt/completion_queue.hpp"
#include "qp/bnxt/queue_memory.hpp"
#include "qp/bnxt/receive_queue.hpp"
#include "qp/bnxt/send_queue.hpp"
#include "qp/failure.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"

namespace rig::qp::bnxt {

// The failure the NIC reported for a queue pair (CREQ QP_ERROR_NOTIFICATION), as its entries
// carry it; `code` is the family's code the control plane passed on (never 0).
[[gnu::cold]] entry_error reported_failure(std::uint8_t code) noexcept;
// A CQE's error status as an entry's error: the status's name from abi's per-type table.
[[gnu::cold]] entry_error requester_error(std::uint8_t status) noexcept;
[[gnu::cold]] entry_error responder_error(std::uint8_t status) noexcept;
[[gnu::cold]] entry_error terminal_error() noexcept;
// A CQE of a kind or queue pair this ring does not take.
[[gnu::cold]] entry_error unexpected_completion() noexcept;

class data_path {
public:
    explicit data_path(const data_path_memory& m)
        : sq(m.send, m.qpn), rq(m.receive, m.qpn), scq(m.send_cq, m.send_cqn), rcq(m.receive_cq, m.receive_cqn),
          qp_handle_(m.qp_handle) {}

    // What one entry takes (queue_pair's misuse checks): static mode's inline limit
    // (BNXT_RE_MAX_INLINE_SIZE), and the seed's message (the WQE length is 32 bits).
    static constexpr std::size_t max_inline = abi::static_max_inline;
    static constexpr std::uint64_t max_message = std::uint64_t{1} << 31;

    // RTR->RTS: the send PSN and path MTU the PSN search entries count from.
    void start_sends(std::uint32_t sq_psn, std::uint32_t path_mtu_bytes) noexcept { sq.start(sq_psn, path_mtu_bytes); }

    // `tag`: the caller's, handed back with the entry's completion by a completion group;
    // `signaled` false: the ring skips its success (the WQE is unsignalled either way: ring()
    // signals a batch's last entry, whose CQE completes the batch).
    void post_send(std::uint64_t at, std::size_t n, std::uint32_t key, std::uint64_t tag, bool signaled = true) {
        sq.label(sq.post_one(abi::SQ_BASE_WQE_TYPE_SEND, local(at, n, key), 0, 0), tag, rig::operation::send, signaled);
    }
    void post_receive(std::uint64_t at, std::size_t n, std::uint32_t key, std::uint64_t tag) {
        rq.label(rq.post(local(at, n, key)), tag, rig::operation::receive);
    }
    void post_write(std::uint64_t at, std::size_t n, std::uint32_t key, const rig::remote& to, std::uint64_t tag,
                    bool signaled = true) {
        sq.label(sq.post_one(abi::SQ_BASE_WQE_TYPE_WRITE_WQE, local(at, n, key), to.address, to.key), tag,
                 rig::operation::write, signaled);
    }
    // A batch of WRITEs from one region (device address `base`, key `key`), checked by the caller
    // (rig::queue_pair's batch write): the room for all of them is the only check left here.
    [[gnu::always_inline]] void post_writes(std::uint64_t base, std::uint32_t key,
                                            std::span<const rig::write_entry> b) {
        sq.post_batch(static_cast<std::uint32_t>(b.size()), abi::SQ_BASE_WQE_TYPE_WRITE_WQE, rig::operation::write,
                      [&](std::uint32_t i) {
                          return send_queue::element{local(base + b[i].at, b[i].n, key), b[i].to.address,
                                                     b[i].to.key, b[i].tag, b[i].sig == rig::signaled::yes};
                      });
    }
    void post_write_inline(std::span<const std::byte> bytes, const rig::remote& to, std::uint64_t tag,
                           bool signaled = true) {
        const std::string_view data(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        sq.label(sq.post(abi::write_inline_op{data, remote(to)}, abi::SQ_BASE_WQE_TYPE_WRITE_WQE,
                         static_cast<std::uint32_t>(bytes.size())),
                 tag, rig::operation::write, signaled);
    }
    void post_write_imm(std::uint64_t at, std::size_t n, std::uint32_t key, const rig::remote& to, std::uint32_t imm,
                        std::uint64_t tag, bool signaled = true) {
        sq.label(sq.post_one(abi::SQ_BASE_WQE_TYPE_WRITE_W_IMMEAD, local(at, n, key), to.address, to.key, imm), tag,
                 rig::operation::write_imm, signaled);
    }
    void post_send_imm(std::uint64_t at, std::size_t n, std::uint32_t key, std::uint32_t imm, std::uint64_t tag,
                       bool signaled = true) {
        sq.label(sq.post_one(abi::SQ_BASE_WQE_TYPE_SEND_W_IMMEAD, local(at, n, key), 0, 0, imm), tag,
                 rig::operation::send_imm, signaled);
    }
    void post_read(const rig::remote& from, std::uint64_t at, std::size_t n, std::uint32_t key, std::uint64_t tag,
                   bool signaled = true) {
        sq.label(sq.post_one(abi::SQ_BASE_WQE_TYPE_READ_WQE, local(at, n, key), from.address, from.key), tag,
                 rig::operation::read, signaled);
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
    // wait(): the CQ's arm doorbell; its notification reaches the NIC's event thread by the NQ.
    void arm(bool send) noexcept { (send ? scq : rcq).arm(); }
    void event(bool) noexcept {}   // bnxt arms carry no event sequence number

    // Takes in every CQE the NIC wrote for either ring, gives their slots back, then spreads a
    // failure over both rings (seed: "the NIC then runs none of its entries that have no
    // completion, of either ring"). `nic_event`: the failure the NIC reported (0: none), read
    // before the CQEs (qp::reported_event: those the NIC wrote before its notification keep
    // their results).
    void take_completions(const std::atomic<std::uint8_t>& nic_event, bool machine_failed) noexcept {
        const std::uint8_t event = qp::reported_event(nic_event);
        take_send_cqes();
        take_receive_cqes();
        settle(event, machine_failed);
    }

    // A CQE of a completion group's CQ (qp/bnxt/group_path.hpp) that names this queue pair's
    // handle: REQ to the send ring, RES_RC to the receive ring, TERMINAL to both (queues.cpp).
    void take_group_cqe(const std::byte* c) noexcept;
    // After a group routed a CQE here: a ring that failed itself fails the other too.
    void spread() noexcept { qp::spread_failure(sq, rq); }
    // After a group took in every CQE, having heard of a failure: as take_completions' end.
    void settle(std::uint8_t event, bool machine_failed) noexcept {
        qp::settle(sq, rq, event, machine_failed, reported_failure,
                   {"the NIC failed (firmware stopped answering or the function is gone)", 0, 0, true});
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
    void take_send_cqes() noexcept;      // queues.cpp
    void take_receive_cqes() noexcept;
    void take_terminal(const std::byte* c) noexcept;
    std::uint64_t qp_handle_;
};

}  // namespace rig::qp::bnxt
