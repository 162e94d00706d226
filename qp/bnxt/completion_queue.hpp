#pragma once
// A bnxt completion queue as the data path sees it: take CQEs by their toggle bit, tell the NIC
// the consumer index, arm for a notification (roce_hsi.h cq_base,
// bnxt_hsi.h dbc_dbc; docs/bnxt-data-path.md).
//
//   CQE n (the unmasked consumer count) lies in slot n & (size-1) and is new once its toggle bit
//   equals the phase of pass n / size: 1 on the first pass, flipped at each wrap (rdma-core
//   verbs.c bnxt_re_is_cqe_valid, bnxt_re_change_cq_phase). Then from_device barrier, read it.
//   After a run of CQEs: one CQ doorbell with the consumer index and its epoch, so the NIC may
//   write those slots again (rdma-core rings it from poll_cq; qplib_res.h bnxt_qplib_ring_db).
//   Arm: a CQ_ARMALL doorbell with the consumer index (qplib_fp.c bnxt_qplib_req_notify_cq).
// Each doorbell has its own word of the queue pair's doorbell block (docs/bnxt-data-path.md).
// Hot path: no allocation, no exception, no log.
#include <cstddef>
#include <cstdint>
#include <span>

#include "abi/barriers.hpp"
#include "abi/bnxt/cqe.hpp"
#include "abi/bnxt/doorbell.hpp"
#include "qp/bnxt/queue_memory.hpp"
#include "qp/cqe_run.hpp"
#include "qp/device_words.hpp"
#include "qp/ring.hpp"

namespace rig::qp::bnxt {

namespace abi = ::rig::bnxt::abi;
namespace barrier = ::rig::abi::barrier;

class completion_queue {
public:
    // Throws std::invalid_argument for a ring that is not 2^n (n <= 24) CQEs, a doorbell word
    // missing or misaligned, or a cqn over 20 bits (the doorbell's xid).
    completion_queue(completion_queue_memory m, std::uint32_t cqn);

    // The next CQE's bytes once the NIC wrote it (its slot stays the NIC's until done()), or an
    // empty span.
    std::span<const std::byte> next() noexcept {
        if (!run_.next(ci_, [this](std::uint32_t n) { return is_new(n); })) {
            return {};
        }
        return {slot(ci_++), abi::cqe_size};
    }

    // Gives the slots taken since the last call back to the NIC: one CQ doorbell. The CQE's loads
    // come before it (x86-64 keeps loads ahead of later stores; to_device stops the compiler).
    void done() noexcept {
        if (ci_ == told_) {
            return;
        }
        barrier::to_device();
        store_register(doorbell_, doorbell_value(abi::DBC_DBC_TYPE_CQ));
        told_ = ci_;
    }

    // Asks for a notification at the next CQE: the one function that writes this CQ's arm word.
    void arm() noexcept {
        barrier::to_device();
        store_register(arm_doorbell_, doorbell_value(abi::DBC_DBC_TYPE_CQ_ARMALL));
    }

    std::uint32_t consumer_index() const noexcept { return ci_; }
    std::uint32_t size() const noexcept { return mask_ + 1; }

private:
    const std::byte* slot(std::uint32_t n) const noexcept { return ring_.data() + (n & mask_) * abi::cqe_size; }
    // The valid (toggle) bit of consumer count n against that count's pass (bnxt_re_is_cqe_valid).
    bool is_new(std::uint32_t n) const noexcept {
        return abi::cqe_is_new(std::span<const std::byte>(slot(n), abi::cqe_size), ((n >> log_size_) & 1u) == 0);
    }
    // index = consumer mod size, epoch = the consumer's pass parity (qplib_res.h
    // bnxt_qplib_hwq_incr_cons flips it at each wrap); abi/bnxt/doorbell.hpp lays out the bits.
    std::uint64_t doorbell_value(std::uint8_t type) const noexcept {
        return abi::fast_doorbell(type, cqn_, ci_ & mask_, ((ci_ >> log_size_) & 1u) != 0);
    }

    std::span<std::byte> ring_;
    std::uint32_t mask_;
    std::uint32_t log_size_;
    std::byte* doorbell_;
    std::byte* arm_doorbell_;
    std::uint32_t cqn_;
    std::uint32_t ci_ = 0;
    std::uint32_t told_ = 0;        // the consumer index the NIC was last told
    cqe_run run_;                   // CQEs from ci_ on already seen new (qp/cqe_run.hpp)
};

}  // namespace rig::qp::bnxt
