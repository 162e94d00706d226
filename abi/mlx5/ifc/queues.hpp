#pragma once
// Event queues and completion queues: CREATE/DESTROY_EQ with eqc, CREATE/DESTROY_CQ with cqc.
// Layouts after mlx5_ifc.h (the kernel's mlx5/core/eq.c and cq.c fill them). log_page_size in eqc
// and cqc is relative to 4 KiB (page_shift - 12); the queue's pages follow the fixed part
// (pas_entry<create_eq_in>(i)).
#include <cstdint>

#include "abi/mlx5/ifc/cmd.hpp"
#include "abi/mlx5/layout.hpp"

namespace rig::mlx5::ifc {

// mlx5_ifc.h eqc. intr is the MSI-X vector (12 bits here; 8 in older copies, same low bits).
#define RIG_MLX5_EQC(F, S)            \
    F(status,           0x0,   0x4)   \
    F(ec,               0xd,   0x1)   \
    F(oi,               0xe,   0x1)   \
    F(st,               0x14,  0x4)   \
    F(page_offset,      0x54,  0x6)   \
    F(log_eq_size,      0x63,  0x5)   \
    F(uar_page,         0x68,  0x18)  \
    F(intr,             0xb4,  0xc)   \
    F(log_page_size,    0xc3,  0x5)   \
    F(consumer_counter, 0x148, 0x18)  \
    F(producer_counter, 0x168, 0x18)
RIG_MLX5_LAYOUT(eqc, 0x200, RIG_MLX5_EQC)

enum class eqc_st : std::uint8_t { armed = 0x9, fired = 0xa };  // MLX5_EQC_ST_*

// CREATE_EQ (0x301): event_bitmask is four big-endian 64-bit words, bit t of word 0 = event
// type t (event_bitmask_word(i) below, as DEVX_ARRAY_SET64 does).
#define RIG_MLX5_CREATE_EQ_IN(F, S)    \
    F(opcode,           0x0,   0x10)   \
    F(uid,              0x10,  0x10)   \
    F(op_mod,           0x30,  0x10)   \
    S(eq_context_entry, 0x80,  eqc)    \
    F(event_bitmask,    0x2c0, 0x100)
RIG_MLX5_LAYOUT(create_eq_in, 0x880, RIG_MLX5_CREATE_EQ_IN)

#define RIG_MLX5_CREATE_EQ_OUT(F, S)  \
    F(status,    0x0,  0x8)           \
    F(syndrome,  0x20, 0x20)          \
    F(eq_number, 0x58, 0x8)
RIG_MLX5_LAYOUT(create_eq_out, 0x80, RIG_MLX5_CREATE_EQ_OUT)

constexpr ::rig::abi::field event_bitmask_word(std::uint32_t i) noexcept {
    return {create_eq_in::event_bitmask.off + 64 * i, 64};
}

// DESTROY_EQ (0x302).
#define RIG_MLX5_DESTROY_EQ_IN(F, S)  \
    F(opcode,    0x0,  0x10)          \
    F(op_mod,    0x30, 0x10)          \
    F(eq_number, 0x58, 0x8)
RIG_MLX5_LAYOUT(destroy_eq_in, 0x80, RIG_MLX5_DESTROY_EQ_IN)

#define RIG_MLX5_DESTROY_EQ_OUT(F, S)  \
    F(status,   0x0,  0x8)             \
    F(syndrome, 0x20, 0x20)
RIG_MLX5_LAYOUT(destroy_eq_out, 0x80, RIG_MLX5_DESTROY_EQ_OUT)

// mlx5_ifc.h cqc. cqe_sz 0 = 64-byte CQEs; c_eqn_or_apu_element = the EQ of its completion
// events; dbr_addr = the CQ's doorbell record; uar_page = the UAR of its arm doorbell.
#define RIG_MLX5_CQC(F, S)                    \
    F(status,                   0x0,   0x4)   \
    F(dbr_umem_valid,           0x6,   0x1)   \
    F(apu_cq,                   0x7,   0x1)   \
    F(cqe_sz,                   0x8,   0x3)   \
    F(cc,                       0xb,   0x1)   \
    F(scqe_break_moderation_en, 0xd,   0x1)   \
    F(oi,                       0xe,   0x1)   \
    F(cq_period_mode,           0xf,   0x2)   \
    F(cqe_comp_en,              0x11,  0x1)   \
    F(mini_cqe_res_format,      0x12,  0x2)   \
    F(st,                       0x14,  0x4)   \
    F(cqe_compression_layout,   0x1e,  0x2)   \
    F(page_offset,              0x54,  0x6)   \
    F(log_cq_size,              0x63,  0x5)   \
    F(uar_page,                 0x68,  0x18)  \
    F(cq_period,                0x84,  0xc)   \
    F(cq_max_count,             0x90,  0x10)  \
    F(c_eqn_or_apu_element,     0xa0,  0x20)  \
    F(log_page_size,            0xc3,  0x5)   \
    F(last_notified_index,      0x108, 0x18)  \
    F(last_solicit_index,       0x128, 0x18)  \
    F(consumer_counter,         0x148, 0x18)  \
    F(producer_counter,         0x168, 0x18)  \
    F(dbr_addr,                 0x1c0, 0x40)
RIG_MLX5_LAYOUT(cqc, 0x200, RIG_MLX5_CQC)

enum class cqc_cqe_sz : std::uint8_t { bytes_64 = 0x0, bytes_128 = 0x1 };  // MLX5_CQC_CQE_SZ_*
enum class cqc_st : std::uint8_t {                                         // MLX5_CQC_ST_*
    solicited_notification_request_armed = 0x6,
    notification_request_armed = 0x9,
    fired = 0xa,
};

// CREATE_CQ (0x400).
#define RIG_MLX5_CREATE_CQ_IN(F, S)  \
    F(opcode,        0x0,   0x10)    \
    F(uid,           0x10,  0x10)    \
    F(op_mod,        0x30,  0x10)    \
    S(cq_context,    0x80,  cqc)     \
    F(cq_umem_valid, 0x2e0, 0x1)
RIG_MLX5_LAYOUT(create_cq_in, 0x880, RIG_MLX5_CREATE_CQ_IN)

#define RIG_MLX5_CREATE_CQ_OUT(F, S)  \
    F(status,   0x0,  0x8)            \
    F(syndrome, 0x20, 0x20)           \
    F(cqn,      0x48, 0x18)
RIG_MLX5_LAYOUT(create_cq_out, 0x80, RIG_MLX5_CREATE_CQ_OUT)

// DESTROY_CQ (0x401).
#define RIG_MLX5_DESTROY_CQ_IN(F, S)  \
    F(opcode, 0x0,  0x10)             \
    F(uid,    0x10, 0x10)             \
    F(op_mod, 0x30, 0x10)             \
    F(cqn,    0x48, 0x18)
RIG_MLX5_LAYOUT(destroy_cq_in, 0x80, RIG_MLX5_DESTROY_CQ_IN)

#define RIG_MLX5_DESTROY_CQ_OUT(F, S)  \
    F(status,   0x0,  0x8)             \
    F(syndrome, 0x20, 0x20)
RIG_MLX5_LAYOUT(destroy_cq_out, 0x80, RIG_MLX5_DESTROY_CQ_OUT)

}  // namespace rig::mlx5::ifc
