#pragma once
// An mlx5 completion queue as the data path sees it: poll CQEs by owner bit, tell the NIC the
// consumer index, arm for an event (rdma-core providers/mlx5/cq.c;
// kernel include/linux/mlx5/cq.h mlx5_cq_arm).
//
//   CQE n (the unmasked consumer index) lies in slot n & (size-1) and is software's once its
//   opcode is not INVALID and its owner bit equals (n >> log_size) & 1. Then from_device
//   barrier, read it, n + 1; once per drain record word MLX5_CQ_SET_CI (+0) = be32(n & 0xffffff).
//   Arm: record word MLX5_CQ_ARM_DB (+4) = be32(sn << 28 | cmd | ci), then the 64-bit UAR write
//   at +0x20 of (that word << 32 | cqn), big-endian; sn counts the CQ's completion events.
//
// One CQ may serve many queue pairs: `poll` hands back the decoded CQE and the caller routes it
// by qpn and opcode to its send_queue or receive_queue. Hot path: no allocation, no exception,
// no log.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "abi/barriers.hpp"
#include "abi/mlx5/completion.hpp"
#include "abi/mlx5/doorbell.hpp"
#include "qp/cqe_run.hpp"
#include "qp/mlx5/device_words.hpp"
#include "qp/ring.hpp"

namespace rig::qp::mlx5 {

namespace abi = ::rig::mlx5::abi;
namespace barrier = ::rig::abi::barrier;

struct completion_queue_memory {
    std::span<std::byte> ring;             // 2^n 64-byte CQEs, initialised to opcode INVALID
    std::span<std::byte> doorbell_record;  // the CQ's 8-byte record (set_ci +0, arm +4)
    std::byte* uar_page = nullptr;         // the UAR named by cqc.uar_page (arm doorbell at 0x20)
};

// The kinds of CQE a queue's ring takes (mlx5dv.h MLX5_CQE_* opcodes).
inline bool is_send_side(abi::cqe_opcode o) noexcept {
    return o == abi::cqe_opcode::req || o == abi::cqe_opcode::req_err;
}

// An error CQE as an entry's error: the syndrome's name from abi's table.
inline entry_error error_of(const abi::completion& c) noexcept {
    return entry_error{abi::to_string(c.error), c.syndrome, c.vendor_syndrome, false};
}
// A flush CQE (syndrome 0x5): the entry did not fail itself, its queue pair had failed.
inline entry_error flushed_error_of(const abi::completion& c) noexcept {
    return entry_error{abi::to_string(c.error), c.syndrome, c.vendor_syndrome, true};
}

// The error a ring fails with when a completion is of a kind it does not take, or names no
// entry it has outstanding (docs/guide.md: "its completions hold a kind its ring does not take").
inline entry_error unexpected_completion() noexcept {
    return entry_error{"completion of a kind this ring does not take", 0, 0, false};
}

class completion_queue {
public:
    // Throws std::invalid_argument for a ring that is not 2^n (n <= 24) CQEs or misaligned, a
    // record shorter than 8 bytes or misaligned, a missing UAR page, or a cqn over 24 bits.
    completion_queue(completion_queue_memory m, std::uint32_t cqn);

    // The next CQE, if the NIC has written it, decoded into `c` (true). Its slot stays the NIC's
    // to skip over until done() gives the slots taken back (the consumer index written once per
    // drain, as rdma-core's mlx5_poll_cq updates the record once after its loop). False, and `c`
    // untouched, while the NIC has not written it. Decoded by abi::decode: a CQE whose opcode
    // mlx5dv.h does not name comes back with that raw opcode and error `unknown` (the caller
    // fails the queue pair it names); never an exception. The hot form: `c` is the caller's
    // (abi::decode says why).
    bool poll(abi::completion& c) noexcept {
        if (!run_.next(ci_, [this](std::uint32_t n) { return owned(n); })) {
            return false;
        }
        const std::span<const std::byte, abi::cqe_size> cqe(slot(ci_), abi::cqe_size);
        abi::decode(cqe, c);      // the decoder pinned to mlx5dv.h (test/unit/mlx5_wqe)
        ++ci_;
        return true;
    }

    std::optional<abi::completion> poll() noexcept {
        abi::completion c;
        if (!poll(c)) {
            return std::nullopt;
        }
        return c;
    }

    // Gives the NIC back every slot taken since the last call: the record's set_ci word, one
    // store (nothing when none was taken). The CQEs' loads before the store that lets the NIC
    // reuse their slots: x86-64 keeps loads ahead of later stores (TSO), so this only stops the
    // compiler; on aarch64 `dmb oshst` orders stores only, as in rdma-core and the kernel
    // (mlx5_cq_set_ci), which write the record with no barrier: the NIC reuses a slot only a
    // whole ring later.
    void done() noexcept {
        if (ci_ == told_) {
            return;
        }
        barrier::to_device();
        store_record(record_ + abi::cq_dbr::set_ci, abi::cq_dbr_set_ci(ci_));
        told_ = ci_;
    }

    // Asks for an event at the next completion (or next solicited one): the one function that
    // writes this CQ's arm record word and its arm doorbell.
    void arm(bool solicited_only = false) noexcept {
        done();   // the record's consumer index is the one the arm word carries
        const std::uint32_t word = abi::cq_arm_word(
            arm_sn_, solicited_only ? abi::cq_arm_solicited : abi::cq_arm_next, ci_);
        store_record(record_ + abi::cq_dbr::arm, abi::to_be32(word));
        barrier::mmio_start();   // the record in host memory before the MMIO doorbell
        store_register(uar_ + abi::uar::cq_doorbell,
                       ::rig::abi::to_be64(abi::cq_arm_doorbell(word, cqn_)));
        barrier::mmio_flush();
    }

    // A completion event for this CQ arrived: the next arm carries the next sequence number
    // (rdma-core mlx5_cq_event: arm_sn++).
    void event() noexcept { ++arm_sn_; }

    std::uint32_t consumer_index() const noexcept { return ci_; }
    std::uint32_t arm_sequence() const noexcept { return arm_sn_ & 3; }
    std::uint32_t size() const noexcept { return mask_ + 1; }

private:
    std::byte* slot(std::uint32_t n) const noexcept { return ring_.data() + (n & mask_) * abi::cqe_size; }
    bool owned(std::uint32_t n) const noexcept {
        return abi::cqe_is_software_owned(std::span<const std::byte, abi::cqe_size>(slot(n), abi::cqe_size), n,
                                          log_size_);
    }

    std::span<std::byte> ring_;
    std::uint32_t mask_;
    std::uint32_t log_size_;
    std::byte* record_;
    std::byte* uar_;
    std::uint32_t cqn_;
    std::uint32_t ci_ = 0;
    std::uint32_t told_ = 0;     // the consumer index last written to the record
    cqe_run run_;                // CQEs from ci_ on already seen software's (qp/cqe_run.hpp)
    std::uint32_t arm_sn_ = 0;
};

}  // namespace rig::qp::mlx5
