#pragma once
// The common header of every firmware command, the command opcodes and the command statuses.
//
// Every `*_in` of mlx5_ifc.h starts with opcode (DW0[31:16]), uid (DW0[15:0]) and op_mod
// (DW1[15:0]); every `*_out` with status (DW0[31:24]) and syndrome (DW1) (kernel cmd.c
// mlx5_cmd_check). rdma-core's copy of mlx5_ifc.h names these two headers mbox_in and mbox_out; the
// kernel's copy has no such struct, so the tests pin them to kernel structs that are exactly the
// header and nothing else: alloc_pd_in (opcode, uid, op_mod) and dealloc_pd_out (status, syndrome),
// both 16 bytes (see abi/mlx5/ifc.hpp).
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "abi/mlx5/layout.hpp"

namespace rig::mlx5::ifc {

// rdma-core mlx5_ifc.h mbox_in / mbox_out.
#define RIG_MLX5_MBOX_IN(F, S) \
    F(opcode, 0x0,  0x10)      \
    F(uid,    0x10, 0x10)      \
    F(op_mod, 0x30, 0x10)
RIG_MLX5_LAYOUT(mbox_in, 0x80, RIG_MLX5_MBOX_IN)

#define RIG_MLX5_MBOX_OUT(F, S) \
    F(status,   0x0,  0x8)      \
    F(syndrome, 0x20, 0x20)
RIG_MLX5_LAYOUT(mbox_out, 0x80, RIG_MLX5_MBOX_OUT)

// The i-th element of a trailing flexible array (`pas[0][0x40]`, `klm_pas_mtt[0][0x20]`, ...).
// mlx5_ifc.h declares these after the fixed part, so sizeof(struct) - and our size_bits -
// excludes them, exactly as MLX5_ST_SZ_BYTES does; a command with n entries is
// size_bytes + n * element bytes long. `start` is where the array begins (abi/mlx5/ifc.hpp
// lists each one, pinned to the kernel header by the tests).
constexpr ::rig::abi::field flex_entry(std::uint32_t start, std::uint32_t element_bits, std::size_t i) noexcept {
    return {static_cast<std::uint32_t>(start + element_bits * i), element_bits};
}
// The i-th 64-bit physical address entry (PAS, MTT) of a layout whose array starts at its end.
template <class L>
constexpr ::rig::abi::field pas_entry(std::size_t i) noexcept {
    return flex_entry(L::size_bits, 64, i);
}
// The length in bytes of a command whose fixed part is L, followed by n 64-bit entries.
template <class L>
constexpr std::size_t length_with_pas(std::size_t n) noexcept {
    return L::size_bytes + 8 * n;
}

// ---- opcodes (mlx5_ifc.h enum MLX5_CMD_OP_*) ------------------------------------------------
// X(our name, kernel suffix after MLX5_CMD_OP_, value). The kernel suffix is what to_string
// returns (as the kernel's mlx5_command_str prints it) and what the tests pin the value to.
// Listed: every command Rig or the kernel's bring-up sends (mlx5_ifc.h MLX5_CMD_OP_*) and the few
// neighbours a driver or model may meet.
#define RIG_MLX5_OPCODES(X)                                         \
    X(query_hca_cap,              QUERY_HCA_CAP,              0x100) \
    X(query_adapter,              QUERY_ADAPTER,              0x101) \
    X(init_hca,                   INIT_HCA,                   0x102) \
    X(teardown_hca,               TEARDOWN_HCA,               0x103) \
    X(enable_hca,                 ENABLE_HCA,                 0x104) \
    X(disable_hca,                DISABLE_HCA,                0x105) \
    X(query_pages,                QUERY_PAGES,                0x107) \
    X(manage_pages,               MANAGE_PAGES,               0x108) \
    X(set_hca_cap,                SET_HCA_CAP,                0x109) \
    X(query_issi,                 QUERY_ISSI,                 0x10a) \
    X(set_issi,                   SET_ISSI,                   0x10b) \
    X(set_driver_version,         SET_DRIVER_VERSION,         0x10d) \
    X(create_mkey,                CREATE_MKEY,                0x200) \
    X(query_mkey,                 QUERY_MKEY,                 0x201) \
    X(destroy_mkey,               DESTROY_MKEY,               0x202) \
    X(query_special_contexts,     QUERY_SPECIAL_CONTEXTS,     0x203) \
    X(create_eq,                  CREATE_EQ,                  0x301) \
    X(destroy_eq,                 DESTROY_EQ,                 0x302) \
    X(query_eq,                   QUERY_EQ,                   0x303) \
    X(gen_eqe,                    GEN_EQE,                    0x304) \
    X(create_cq,                  CREATE_CQ,                  0x400) \
    X(destroy_cq,                 DESTROY_CQ,                 0x401) \
    X(query_cq,                   QUERY_CQ,                   0x402) \
    X(modify_cq,                  MODIFY_CQ,                  0x403) \
    X(create_qp,                  CREATE_QP,                  0x500) \
    X(destroy_qp,                 DESTROY_QP,                 0x501) \
    X(rst2init_qp,                RST2INIT_QP,                0x502) \
    X(init2rtr_qp,                INIT2RTR_QP,                0x503) \
    X(rtr2rts_qp,                 RTR2RTS_QP,                 0x504) \
    X(rts2rts_qp,                 RTS2RTS_QP,                 0x505) \
    X(sqerr2rts_qp,               SQERR2RTS_QP,               0x506) \
    X(qp_2err,                    2ERR_QP,                    0x507) \
    X(qp_2rst,                    2RST_QP,                    0x50a) \
    X(query_qp,                   QUERY_QP,                   0x50b) \
    X(sqd_rts_qp,                 SQD_RTS_QP,                 0x50c) \
    X(init2init_qp,               INIT2INIT_QP,               0x50e) \
    X(query_vport_state,          QUERY_VPORT_STATE,          0x750) \
    X(modify_vport_state,         MODIFY_VPORT_STATE,         0x751) \
    X(query_nic_vport_context,    QUERY_NIC_VPORT_CONTEXT,    0x754) \
    X(modify_nic_vport_context,   MODIFY_NIC_VPORT_CONTEXT,   0x755) \
    X(query_roce_address,         QUERY_ROCE_ADDRESS,         0x760) \
    X(set_roce_address,           SET_ROCE_ADDRESS,           0x761) \
    X(alloc_q_counter,            ALLOC_Q_COUNTER,            0x771) \
    X(dealloc_q_counter,          DEALLOC_Q_COUNTER,          0x772) \
    X(query_q_counter,            QUERY_Q_COUNTER,            0x773) \
    X(alloc_pd,                   ALLOC_PD,                   0x800) \
    X(dealloc_pd,                 DEALLOC_PD,                 0x801) \
    X(alloc_uar,                  ALLOC_UAR,                  0x802) \
    X(dealloc_uar,                DEALLOC_UAR,                0x803) \
    X(config_int_moderation,      CONFIG_INT_MODERATION,      0x804) \
    X(access_reg,                 ACCESS_REG,                 0x805) \
    X(nop,                        NOP,                        0x80d) \
    X(alloc_transport_domain,     ALLOC_TRANSPORT_DOMAIN,     0x816) \
    X(dealloc_transport_domain,   DEALLOC_TRANSPORT_DOMAIN,   0x817) \
    X(set_l2_table_entry,         SET_L2_TABLE_ENTRY,         0x829) \
    X(query_l2_table_entry,       QUERY_L2_TABLE_ENTRY,       0x82a) \
    X(delete_l2_table_entry,      DELETE_L2_TABLE_ENTRY,      0x82b) \
    X(create_umem,                CREATE_UMEM,                0xa08) \
    X(destroy_umem,               DESTROY_UMEM,               0xa0a)

enum class opcode : std::uint16_t {
#define RIG_MLX5_OPCODE_ENUM(name, kname, value) name = value,
    RIG_MLX5_OPCODES(RIG_MLX5_OPCODE_ENUM)
#undef RIG_MLX5_OPCODE_ENUM
};

inline constexpr opcode all_opcodes[] = {
#define RIG_MLX5_OPCODE_LIST(name, kname, value) opcode::name,
    RIG_MLX5_OPCODES(RIG_MLX5_OPCODE_LIST)
#undef RIG_MLX5_OPCODE_LIST
};

// The kernel's name of an opcode without its MLX5_CMD_OP_ prefix ("CREATE_QP", "2ERR_QP"), or
// "unknown command opcode" (the kernel's words) for a value not listed above.
constexpr std::string_view to_string(opcode op) noexcept {
    switch (op) {
#define RIG_MLX5_OPCODE_CASE(name, kname, value) \
    case opcode::name:                           \
        return #kname;
        RIG_MLX5_OPCODES(RIG_MLX5_OPCODE_CASE)
#undef RIG_MLX5_OPCODE_CASE
    }
    return "unknown command opcode";
}

// ---- command status (mbox_out.status; kernel device.h MLX5_CMD_STAT_*) ------------------------
// Not in mlx5_ifc.h: the values are device.h's, pinned by the unit tests.
#define RIG_MLX5_CMD_STATUSES(X)                            \
    X(ok,                     OK,                     0x00) \
    X(int_err,                INT_ERR,                0x01) \
    X(bad_op_err,             BAD_OP_ERR,             0x02) \
    X(bad_param_err,          BAD_PARAM_ERR,          0x03) \
    X(bad_sys_state_err,      BAD_SYS_STATE_ERR,      0x04) \
    X(bad_res_err,            BAD_RES_ERR,            0x05) \
    X(res_busy,               RES_BUSY,               0x06) \
    X(lim_err,                LIM_ERR,                0x08) \
    X(bad_res_state_err,      BAD_RES_STATE_ERR,      0x09) \
    X(ix_err,                 IX_ERR,                 0x0a) \
    X(no_res_err,             NO_RES_ERR,             0x0f) \
    X(bad_qp_state_err,       BAD_QP_STATE_ERR,       0x10) \
    X(bad_pkt_err,            BAD_PKT_ERR,            0x30) \
    X(bad_size_outs_cqes_err, BAD_SIZE_OUTS_CQES_ERR, 0x40) \
    X(bad_inp_len_err,        BAD_INP_LEN_ERR,        0x50) \
    X(bad_outp_len_err,       BAD_OUTP_LEN_ERR,       0x51)

enum class cmd_status : std::uint8_t {
#define RIG_MLX5_STATUS_ENUM(name, kname, value) name = value,
    RIG_MLX5_CMD_STATUSES(RIG_MLX5_STATUS_ENUM)
#undef RIG_MLX5_STATUS_ENUM
};

inline constexpr cmd_status all_cmd_statuses[] = {
#define RIG_MLX5_STATUS_LIST(name, kname, value) cmd_status::name,
    RIG_MLX5_CMD_STATUSES(RIG_MLX5_STATUS_LIST)
#undef RIG_MLX5_STATUS_LIST
};

// "BAD_PARAM_ERR" etc. (the suffix of MLX5_CMD_STAT_*), or "unknown status".
constexpr std::string_view to_string(cmd_status s) noexcept {
    switch (s) {
#define RIG_MLX5_STATUS_CASE(name, kname, value) \
    case cmd_status::name:                       \
        return #kname;
        RIG_MLX5_CMD_STATUSES(RIG_MLX5_STATUS_CASE)
#undef RIG_MLX5_STATUS_CASE
    }
    return "unknown status";
}

}  // namespace rig::mlx5::ifc
