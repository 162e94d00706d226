#pragma once
// The receive ring of a bnxt RC queue pair (roce_hsi.h rq_wqe_hdr; qplib_fp.c
// bnxt_qplib_post_recv):
//   entry k in WQE k & (size-1) of 128 bytes (rq_sge 6: static mode's 8 slots): rq_wqe_hdr with
//   wr_id = k mod 2^20, which the responder CQE gives back, then one SGE (abi/bnxt/wqe.hpp).
//   Ringing: to_device barrier, the RQ doorbell: index = producer mod size, epoch = its pass
//   parity (qplib_res.h bnxt_qplib_ring_prod_db), one 64-bit store to the RQ's word.
// A responder CQE (RES_RC) names its entry by wr_id and carries the message's length; an error
// status fails the entry and the ring; HW_FLUSH_ERR CQEs (the NIC's flush of receives left on a
// failed QP) are skipped, as drivers do (rdma-core verbs.c bnxt_re_poll_err_rcqe).
// A ring of 2^n WQEs holds 2^n - 1 (qplib_fp.h bnxt_qplib_queue_full).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "abi/barriers.hpp"
#include "abi/bnxt/cqe.hpp"
#include "abi/bnxt/doorbell.hpp"
#include "abi/bnxt/wqe.hpp"
#include "qp/bnxt/queue_memory.hpp"
#include "qp/device_words.hpp"
#include "qp/ring.hpp"

namespace rig::qp::bnxt {

namespace abi = ::rig::bnxt::abi;
namespace barrier = ::rig::abi::barrier;

class receive_queue {
public:
    // Throws std::invalid_argument for a ring that is not 2^n (2..32768) WQEs of 128 bytes, a
    // doorbell word missing or misaligned, or a qpn over 20 bits.
    receive_queue(receive_queue_memory m, std::uint32_t qpn);

    std::uint32_t room() const noexcept { return entries_.room(); }
    std::uint32_t slots() const noexcept { return entries_.slots(); }
    std::uint64_t posted() const noexcept { return entries_.posted(); }
    const qp::ring& entries() const noexcept { return entries_; }
    // Entry k's tag and operation, handed back with its result by a completion group.
    void label(std::uint64_t k, std::uint64_t tag, rig::operation op) noexcept { entries_.label(k, tag, op); }

    // Writes one receive entry and returns its number; the NIC sees it at the next ring().
    // Misuse (no room) throws std::invalid_argument and changes nothing; the element's values are
    // the caller's, checked (qp.cpp).
    std::uint64_t post(const abi::local& into) {
        entries_.check_room();
        const std::uint64_t k = entries_.posted();
        abi::fast::write_receive(ring_.data() + (k & mask_) * (abi::static_wqe_slots * abi::wqe_slot_size),
                                 static_cast<std::uint32_t>(k & abi::max_wr_id), into);
        entries_.push_checked(k, static_cast<std::uint32_t>(into.bytes));
        return k;
    }

    // The doorbell: the one function that writes this queue's doorbell word.
    void ring() noexcept {
        const std::uint64_t p = entries_.posted();
        if (p == rung_) {
            return;
        }
        barrier::to_device();   // the WQEs before the doorbell
        store_register(doorbell_, abi::fast_doorbell(abi::DBC_DBC_TYPE_RQ, qpn_, static_cast<std::uint32_t>(p & mask_),
                                                     ((p >> log_size_) & 1u) != 0));
        rung_ = p;
    }

    // A responder CQE of this queue pair: its status, flags, the entry's wr_id, the length, and
    // the immediate (meant when flags has IMM).
    void complete(std::uint8_t status, std::uint16_t flags, std::uint32_t wr_id, std::uint32_t length,
                  std::uint32_t immediate) noexcept;

    void fail(entry_error e) noexcept { entries_.fail(e); }
    void adopt_failure(entry_error e) noexcept { entries_.adopt_failure(e); }
    std::optional<entry_result> poll() noexcept { return entries_.take(); }

private:
    std::span<std::byte> ring_;
    std::uint64_t mask_;
    std::uint32_t log_size_;
    std::byte* doorbell_;
    std::uint32_t qpn_;
    std::uint64_t rung_ = 0;
    qp::ring entries_;
};

}  // namespace rig::qp::bnxt
