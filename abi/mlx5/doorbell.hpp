#pragma once
// Doorbell records (host memory) and access-region (UAR) registers of a ConnectX function:
// rdma-core mlx5dv.h / providers/mlx5 (qp.c post_send_db, cq.c mlx5_arm_cq) and the kernel's
// include/linux/mlx5/{cq.h,doorbell.h}.
//
// A send is posted in three steps, each ordered after the one before (rdma-core post_send_db):
//  1. entries written in the send ring;
//  2. the QP doorbell record's send counter = producer count in 64-byte blocks (16 bits);
//  3. the entry's first 8 bytes (ctrl opmod_idx_opcode + qpn_ds) written as one 64-bit store
//     to the UAR's BlueFlame register, alternating between its two halves; or, for a doorbell
//     of a single WQE, the whole WQE copied there (BlueFlame: rdma-core qp.c mlx5_bf_copy), its
//     first 8 bytes being the same ctrl bytes.
// A receive is posted by steps 1 and 2 only (the receive counter); it has no MMIO doorbell.
#include <cstddef>
#include <cstdint>

#include "abi/bits.hpp"

namespace rig::mlx5::abi {

using ::rig::abi::to_be32;

// ---- doorbell records: two big-endian 32-bit words each -------------------------------------
namespace qp_dbr {
inline constexpr std::size_t receive_counter = 0;   // MLX5_RCV_DBR: be32(rq head & 0xffff)
inline constexpr std::size_t send_counter = 4;      // MLX5_SND_DBR: be32(sq producer & 0xffff)
inline constexpr std::size_t size = 8;
}  // namespace qp_dbr

namespace cq_dbr {
inline constexpr std::size_t set_ci = 0;    // MLX5_CQ_SET_CI: be32(consumer index & 0xffffff)
inline constexpr std::size_t arm = 4;       // MLX5_CQ_ARM_DB: be32(sn << 28 | cmd | ci)
inline constexpr std::size_t size = 8;
}  // namespace cq_dbr

inline constexpr std::uint32_t qp_dbr_counter(std::uint32_t count) noexcept {
    return to_be32(count & 0xffff);
}
inline constexpr std::uint32_t cq_dbr_set_ci(std::uint32_t consumer_index) noexcept {
    return to_be32(consumer_index & 0xffffff);
}

// ---- UAR page registers (offsets inside one 4 KiB UAR page of BAR0) -------------------------
// The one definition of each for the driver, the firmware layer and the model; pinned to
// linux-source-6.12 by test/unit/mlx5_doorbell. A UAR is one adapter page (device.h
// MLX5_ADAPTER_PAGE_SHIFT 12; Rig sets log_uar_page_sz 0): UAR n is BAR0 + n * uar_page_size.
inline constexpr std::size_t uar_page_size = 4096;
namespace uar {
inline constexpr std::size_t cq_doorbell = 0x20;             // doorbell.h MLX5_CQ_DOORBELL: arm, 64-bit
// EQ doorbells (core/eq.c MLX5_EQ_DOORBELL_OFFSET 0x40; lib/eq.h eq_update_ci writes
// eq->doorbell + (arm ? 0 : 2) be32 words): the consumer index and arm, or the index only.
inline constexpr std::size_t eq_doorbell_arm = 0x40;
inline constexpr std::size_t eq_doorbell_no_arm = 0x48;
inline constexpr std::size_t bf_offset = 0x800;              // MLX5_BF_OFFSET: first bfreg
inline constexpr std::size_t bfregs_per_uar = 4;             // MLX5_BFREGS_PER_UAR
}  // namespace uar

// bfreg k of a UAR whose bf registers are 2^log_bf_reg_size bytes (cmd_hca_cap.log_bf_reg_size);
// each is two buffers of half that size, used alternately.
inline constexpr std::size_t bfreg_offset(std::size_t k, std::uint32_t log_bf_reg_size) noexcept {
    return uar::bf_offset + k * (std::size_t{1} << log_bf_reg_size);
}
// One of the two buffers of a bfreg (rdma-core mlx5.c: bfs[i].buf_size = bf_reg_size / 2; qp.c
// post_send_db: bf->offset ^= bf->buf_size after every doorbell).
inline constexpr std::size_t bfreg_half(std::uint32_t log_bf_reg_size) noexcept {
    return (std::size_t{1} << log_bf_reg_size) / 2;
}
// The four bfregs lie in the page's upper half: 2^log_bf_reg_size at most 512 bytes
// (0x800 + 4 * 512 = 4096), and a half holds at least one copied 64-byte block.
inline constexpr std::uint32_t min_log_bf_reg_size = 7;
inline constexpr std::uint32_t max_log_bf_reg_size = 9;
// A BlueFlame copy goes to the register in blocks of 64 bytes, each as 8 ascending 64-bit stores
// (rdma-core qp.c mlx5_bf_copy over util/mmio.h mmio_memcpy_x64); a WQE basic block is one block.
inline constexpr std::size_t bf_copy_block = 64;

// CQ arm (kernel include/linux/mlx5/cq.h mlx5_cq_arm): the record word, and the 64-bit UAR value
// whose first (lower-addressed) dword is the record word and second the CQ number, both big-endian.
inline constexpr std::uint32_t cq_arm_next = 0;          // MLX5_CQ_DB_REQ_NOT
inline constexpr std::uint32_t cq_arm_solicited = 1u << 24;   // MLX5_CQ_DB_REQ_NOT_SOL
inline constexpr std::uint32_t cq_arm_word(std::uint32_t sn, std::uint32_t cmd,
                                           std::uint32_t consumer_index) noexcept {
    return ((sn & 3) << 28) | cmd | (consumer_index & 0xffffff);
}
inline constexpr std::uint64_t cq_arm_doorbell(std::uint32_t arm_word, std::uint32_t cqn) noexcept {
    return (std::uint64_t{arm_word} << 32) | (cqn & 0xffffff);   // written with store_be<u64>
}

// EQ consumer-index doorbell (kernel mlx5/core/eq.c eq_update_ci): be32(eqn << 24 | ci & 0xffffff).
inline constexpr std::uint32_t eq_doorbell(std::uint32_t eqn, std::uint32_t consumer_index) noexcept {
    return (eqn << 24) | (consumer_index & 0xffffff);
}

}  // namespace rig::mlx5::abi
