#pragma once
// An mlx5 completion queue as the data path sees it: poll CQEs by owner bit, tell the NIC the
// consumer index, arm for an event (reference/mlx5.md §4.5, §4.6; rdma-core providers/mlx5/cq.c).
//
//   CQE n (the unmasked consumer index) lies in slot n & (size-1) and is software's once its
//   opcode is not INVALID and its owner bit equals (n >> log_size) & 1. Then from_device
//   barrier, read it, n + 1, and record word MLX5_CQ_SET_CI (+0) = be32(n & 0xffffff).
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

#include "abi/mlx5/completion.hpp"
#include "abi/mlx5/doorbell.hpp"
#include "qp/barriers.hpp"
#include "qp/mlx5/device_words.hpp"
#include "qp/ring.hpp"

namespace rig::qp::mlx5 {

namespace abi = ::rig::mlx5::abi;

struct completion_queue_memory {
    std::span<std::byte> ring;             // 2^n 64-byte CQEs, initialised to opcode INVALID
    std::span<std::byte> doorbell_record;  // the CQ's 8-byte record (set_ci +0, arm +4)
    std::byte* uar_page = nullptr;         // the UAR named by cqc.uar_page (arm doorbell at 0x20)
};

// The kinds of CQE a queue's ring takes (reference §4.5 opcode table).
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
// entry it has outstanding (DESIGN.md §2: "its completions hold a kind its ring does not take").
inline entry_error unexpected_completion() noexcept {
    return entry_error{"completion of a kind this ring does not take", 0, 0, false};
}

class completion_queue {
public:
    // Throws std::invalid_argument for a ring that is not 2^n (n <= 24) CQEs or misaligned, a
    // record shorter than 8 bytes or misaligned, a missing UAR page, or a cqn over 24 bits.
    completion_queue(completion_queue_memory m, std::uint32_t cqn);

    // The next CQE, if the NIC has written it, decoded into `c` (true); its slot is then given
    // back to the NIC. False, and `c` untouched, while the NIC has not written it. A CQE whose
    // opcode abi does not know comes back with that raw opcode and error `unknown` (the caller
    // fails the queue pair it names); never an exception. The hot form: `c` is the caller's, so
    // the fields are stored once, where they are read (a returned struct built from narrow
    // stores and copied out measured ~2x the poll cost: store-forwarding stalls).
    bool poll(abi::completion& c) noexcept {
        std::byte* slot = ring_.data() + (ci_ & mask_) * abi::cqe_size;
        const std::span<const std::byte, abi::cqe_size> cqe(slot, abi::cqe_size);
        if (!abi::cqe_is_software_owned(cqe, ci_, log_size_)) {
            return false;
        }
        barrier::from_device();   // the owner bit before the rest of the CQE
        decode(cqe, c);
        ++ci_;
        // The CQE's loads before the store that lets the NIC reuse its slot: x86-64 keeps loads
        // ahead of later stores (TSO), so this only stops the compiler; on aarch64 `dmb oshst`
        // orders stores only, as in rdma-core and the kernel (mlx5_cq_set_ci), which write the
        // record with no barrier: the NIC reuses the slot only a whole ring later.
        barrier::to_device();
        store_record(record_ + abi::cq_dbr::set_ci, abi::cq_dbr_set_ci(ci_));
        return true;
    }

    std::optional<abi::completion> poll() noexcept {
        abi::completion c;
        if (!poll(c)) {
            return std::nullopt;
        }
        return c;
    }

    // Asks for an event at the next completion (or next solicited one): the one function that
    // writes this CQ's arm record word and its arm doorbell.
    void arm(bool solicited_only = false) noexcept {
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
    // The fields of a CQE at abi's offsets (cqe_offset, mlx5dv.h struct mlx5_cqe64), decoded here
    // rather than by abi::decode, whose std::string error alternative costs on every CQE.
    static void decode(std::span<const std::byte, abi::cqe_size> c, abi::completion& x) noexcept {
        using ::rig::abi::load_be;
        namespace at = abi::cqe_offset;
        const std::uint8_t op_own = abi::cqe_op_own(c);
        x.opcode = static_cast<abi::cqe_opcode>(op_own >> 4);
        x.format = static_cast<std::uint8_t>((op_own >> 2) & 3);
        x.solicited = (op_own & 2) != 0;
        x.owner = (op_own & 1) != 0;
        const std::uint32_t sop_drop_qpn = load_be<std::uint32_t>(c.data() + at::sop_drop_qpn);
        x.qpn = sop_drop_qpn & 0xffffff;
        x.send_opcode = static_cast<std::uint8_t>(sop_drop_qpn >> 24);
        x.wqe_counter = load_be<std::uint16_t>(c.data() + at::wqe_counter);
        x.byte_count = load_be<std::uint32_t>(c.data() + at::byte_cnt);
        x.immediate = load_be<std::uint32_t>(c.data() + at::imm_inval_pkey);
        x.error = abi::cqe_error::none;
        x.syndrome = 0;
        x.vendor_syndrome = 0;
        if (!known(op_own >> 4)) [[unlikely]] {
            x.error = abi::cqe_error::unknown;   // handed back raw: the caller fails its QP
            x.byte_count = 0;
        } else if (x.opcode == abi::cqe_opcode::req_err || x.opcode == abi::cqe_opcode::resp_err) {
            x.syndrome = static_cast<std::uint8_t>(c[at::syndrome]);
            x.vendor_syndrome = static_cast<std::uint8_t>(c[at::vendor_err_synd]);
            x.error = abi::cqe_error_from_syndrome(x.syndrome);
            x.byte_count = 0;   // an error CQE's byte_cnt place says nothing
        }
    }
    // opcodes mlx5dv.h names (MLX5_CQE_*): 0..6, 12..15
    static bool known(unsigned op) noexcept { return ((0xf07fu >> op) & 1) != 0; }

    std::span<std::byte> ring_;
    std::uint32_t mask_;
    std::uint32_t log_size_;
    std::byte* record_;
    std::byte* uar_;
    std::uint32_t cqn_;
    std::uint32_t ci_ = 0;
    std::uint32_t arm_sn_ = 0;
};

}  // namespace rig::qp::mlx5
