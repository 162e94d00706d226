#pragma once
// Resource commands: UARs (doorbell pages in BAR0), protection domains and memory keys.
// Layouts after mlx5_ifc.h (the kernel's mlx5/core/uar.c, pd.c, and drivers/infiniband/hw/mlx5/mr.c
// use them).
#include <cstdint>

#include "abi/mlx5/ifc/cmd.hpp"
#include "abi/mlx5/layout.hpp"

namespace rig::mlx5::ifc {

// ALLOC_UAR (0x802) / DEALLOC_UAR (0x803): UAR n is the 4 KiB page at BAR0 + n * 4096 (with
// log_uar_page_sz = 0).
#define RIG_MLX5_ALLOC_UAR_IN(F, S)  \
    F(opcode, 0x0,  0x10)            \
    F(uid,    0x10, 0x10)            \
    F(op_mod, 0x30, 0x10)
RIG_MLX5_LAYOUT(alloc_uar_in, 0x80, RIG_MLX5_ALLOC_UAR_IN)

#define RIG_MLX5_ALLOC_UAR_OUT(F, S)  \
    F(status,   0x0,  0x8)            \
    F(syndrome, 0x20, 0x20)           \
    F(uar,      0x48, 0x18)
RIG_MLX5_LAYOUT(alloc_uar_out, 0x80, RIG_MLX5_ALLOC_UAR_OUT)

#define RIG_MLX5_DEALLOC_UAR_IN(F, S)  \
    F(opcode, 0x0,  0x10)              \
    F(uid,    0x10, 0x10)              \
    F(op_mod, 0x30, 0x10)              \
    F(uar,    0x48, 0x18)
RIG_MLX5_LAYOUT(dealloc_uar_in, 0x80, RIG_MLX5_DEALLOC_UAR_IN)

#define RIG_MLX5_DEALLOC_UAR_OUT(F, S)  \
    F(status,   0x0,  0x8)              \
    F(syndrome, 0x20, 0x20)
RIG_MLX5_LAYOUT(dealloc_uar_out, 0x80, RIG_MLX5_DEALLOC_UAR_OUT)

// ALLOC_PD (0x800) / DEALLOC_PD (0x801).
#define RIG_MLX5_ALLOC_PD_IN(F, S)  \
    F(opcode, 0x0,  0x10)           \
    F(uid,    0x10, 0x10)           \
    F(op_mod, 0x30, 0x10)
RIG_MLX5_LAYOUT(alloc_pd_in, 0x80, RIG_MLX5_ALLOC_PD_IN)

#define RIG_MLX5_ALLOC_PD_OUT(F, S)  \
    F(status,   0x0,  0x8)           \
    F(syndrome, 0x20, 0x20)          \
    F(pd,       0x48, 0x18)
RIG_MLX5_LAYOUT(alloc_pd_out, 0x80, RIG_MLX5_ALLOC_PD_OUT)

#define RIG_MLX5_DEALLOC_PD_IN(F, S)  \
    F(opcode, 0x0,  0x10)             \
    F(uid,    0x10, 0x10)             \
    F(op_mod, 0x30, 0x10)             \
    F(pd,     0x48, 0x18)
RIG_MLX5_LAYOUT(dealloc_pd_in, 0x80, RIG_MLX5_DEALLOC_PD_IN)

#define RIG_MLX5_DEALLOC_PD_OUT(F, S)  \
    F(status,   0x0,  0x8)             \
    F(syndrome, 0x20, 0x20)
RIG_MLX5_LAYOUT(dealloc_pd_out, 0x80, RIG_MLX5_DEALLOC_PD_OUT)

// mlx5_ifc.h mkc, the memory key context. log_page_size is the absolute page shift (not
// relative to 4 KiB as in qpc/cqc/eqc), and 6 bits wide; the key is (mkey_index << 8) | mkey_7_0.
// access_mode_1_0 with access_mode_4_2 above it: 0 PA, 1 MTT, 2 KLM, 3 KSM, 4 SW_ICM, 5 MEMIC.
#define RIG_MLX5_MKC(F, S)                             \
    F(free,                              0x1,   0x1)   \
    F(access_mode_4_2,                   0x3,   0x3)   \
    F(relaxed_ordering_write,            0xd,   0x1)   \
    F(small_fence_on_rdma_read_response, 0xf,   0x1)   \
    F(umr_en,                            0x10,  0x1)   \
    F(a,                                 0x11,  0x1)   \
    F(rw,                                0x12,  0x1)   \
    F(rr,                                0x13,  0x1)   \
    F(lw,                                0x14,  0x1)   \
    F(lr,                                0x15,  0x1)   \
    F(access_mode_1_0,                   0x16,  0x2)   \
    F(ma_translation_mode,               0x1a,  0x2)   \
    F(qpn,                               0x20,  0x18)  \
    F(mkey_7_0,                          0x38,  0x8)   \
    F(length64,                          0x60,  0x1)   \
    F(bsf_en,                            0x61,  0x1)   \
    F(sync_umr,                          0x62,  0x1)   \
    F(expected_sigerr_count,             0x65,  0x1)   \
    F(en_rinval,                         0x67,  0x1)   \
    F(pd,                                0x68,  0x18)  \
    F(start_addr,                        0x80,  0x40)  \
    F(len,                               0xc0,  0x40)  \
    F(bsf_octword_size,                  0x100, 0x20)  \
    F(crossing_target_vhca_id,           0x180, 0x10)  \
    F(translations_octword_size,         0x1a0, 0x20)  \
    F(relaxed_ordering_read,             0x1d9, 0x1)   \
    F(log_page_size,                     0x1da, 0x6)
RIG_MLX5_LAYOUT(mkc, 0x200, RIG_MLX5_MKC)

enum class mkc_access_mode : std::uint8_t {  // MLX5_MKC_ACCESS_MODE_*
    pa = 0x0,
    mtt = 0x1,
    klms = 0x2,
    ksm = 0x3,
    sw_icm = 0x4,
    memic = 0x5,
    crossing = 0x6,
};

// CREATE_MKEY (0x200): the translation entries follow the fixed part (klm_pas_mtt, declared in
// 32-bit units by mlx5_ifc.h; an MTT entry is 64 bits: page address | 1 read | 2 write), so
// pas_entry<create_mkey_in>(i) addresses MTT entry i.
#define RIG_MLX5_CREATE_MKEY_IN(F, S)                 \
    F(opcode,                           0x0,   0x10)  \
    F(uid,                              0x10,  0x10)  \
    F(op_mod,                           0x30,  0x10)  \
    F(pg_access,                        0x60,  0x1)   \
    F(mkey_umem_valid,                  0x61,  0x1)   \
    F(data_direct,                      0x62,  0x1)   \
    S(memory_key_mkey_entry,            0x80,  mkc)   \
    F(translations_octword_actual_size, 0x300, 0x20)
RIG_MLX5_LAYOUT(create_mkey_in, 0x880, RIG_MLX5_CREATE_MKEY_IN)

#define RIG_MLX5_CREATE_MKEY_OUT(F, S)  \
    F(status,     0x0,  0x8)            \
    F(syndrome,   0x20, 0x20)           \
    F(mkey_index, 0x48, 0x18)
RIG_MLX5_LAYOUT(create_mkey_out, 0x80, RIG_MLX5_CREATE_MKEY_OUT)

namespace mtt {
inline constexpr std::uint64_t read_enable = 1;   // device.h MLX5_EN_RD, mlx5_ifc.h mtt.rd_en
inline constexpr std::uint64_t write_enable = 2;  // MLX5_EN_WR, mtt.wr_en
}  // namespace mtt

// DESTROY_MKEY (0x202).
#define RIG_MLX5_DESTROY_MKEY_IN(F, S)  \
    F(opcode,     0x0,  0x10)           \
    F(uid,        0x10, 0x10)           \
    F(op_mod,     0x30, 0x10)           \
    F(mkey_index, 0x48, 0x18)
RIG_MLX5_LAYOUT(destroy_mkey_in, 0x80, RIG_MLX5_DESTROY_MKEY_IN)

#define RIG_MLX5_DESTROY_MKEY_OUT(F, S)  \
    F(status,   0x0,  0x8)               \
    F(syndrome, 0x20, 0x20)
RIG_MLX5_LAYOUT(destroy_mkey_out, 0x80, RIG_MLX5_DESTROY_MKEY_OUT)

}  // namespace rig::mlx5::ifc
