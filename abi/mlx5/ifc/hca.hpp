#pragma once
// Bring-up and teardown commands of the HCA (the function as a whole): ENABLE/DISABLE_HCA,
// QUERY/SET_ISSI, QUERY/MANAGE_PAGES, QUERY/SET_HCA_CAP, INIT/TEARDOWN_HCA, QUERY_ADAPTER, NOP and
// ACCESS_REG with the PAOS register. Order of use: rdma-core's
// providers/mlx5/mlx5_vfio.c mlx5_vfio_alloc_context and the kernel's mlx5/core/main.c
// mlx5_function_enable.
// Layouts after mlx5_ifc.h; the structs' names are mlx5_ifc.h's without mlx5_ifc_ and _bits.
#include <cstdint>

#include "abi/mlx5/ifc/cmd.hpp"
#include "abi/mlx5/ifc/hca_cap.hpp"
#include "abi/mlx5/layout.hpp"

namespace rig::mlx5::ifc {

// ENABLE_HCA (0x104) is the first command, DISABLE_HCA (0x105) the last; function_id 0 is this
// function. Their outputs are 12 bytes, not 16 (mlx5_ifc.h).
#define RIG_MLX5_ENABLE_HCA_IN(F, S)      \
    F(opcode,                0x0,  0x10)  \
    F(op_mod,                0x30, 0x10)  \
    F(embedded_cpu_function, 0x40, 0x1)   \
    F(function_id,           0x50, 0x10)
RIG_MLX5_LAYOUT(enable_hca_in, 0x80, RIG_MLX5_ENABLE_HCA_IN)

#define RIG_MLX5_ENABLE_HCA_OUT(F, S)  \
    F(status,   0x0,  0x8)             \
    F(syndrome, 0x20, 0x20)
RIG_MLX5_LAYOUT(enable_hca_out, 0x60, RIG_MLX5_ENABLE_HCA_OUT)

#define RIG_MLX5_DISABLE_HCA_IN(F, S)     \
    F(opcode,                0x0,  0x10)  \
    F(op_mod,                0x30, 0x10)  \
    F(embedded_cpu_function, 0x40, 0x1)   \
    F(function_id,           0x50, 0x10)
RIG_MLX5_LAYOUT(disable_hca_in, 0x80, RIG_MLX5_DISABLE_HCA_IN)

#define RIG_MLX5_DISABLE_HCA_OUT(F, S)  \
    F(status,   0x0,  0x8)              \
    F(syndrome, 0x20, 0x20)
RIG_MLX5_LAYOUT(disable_hca_out, 0x60, RIG_MLX5_DISABLE_HCA_OUT)

// INIT_HCA (0x102), after the boot and init pages are given. sw_owner_id is a 16-byte string.
#define RIG_MLX5_INIT_HCA_IN(F, S)  \
    F(opcode,      0x0,  0x10)      \
    F(op_mod,      0x30, 0x10)      \
    F(sw_vhca_id,  0x62, 0xe)       \
    F(sw_owner_id, 0x80, 0x80)
RIG_MLX5_LAYOUT(init_hca_in, 0x100, RIG_MLX5_INIT_HCA_IN)

#define RIG_MLX5_INIT_HCA_OUT(F, S)  \
    F(status,   0x0,  0x8)           \
    F(syndrome, 0x20, 0x20)
RIG_MLX5_LAYOUT(init_hca_out, 0x80, RIG_MLX5_INIT_HCA_OUT)

// TEARDOWN_HCA (0x103): profile, and the FORCE/fast-teardown outcome in state.
#define RIG_MLX5_TEARDOWN_HCA_IN(F, S)  \
    F(opcode,  0x0,  0x10)              \
    F(op_mod,  0x30, 0x10)              \
    F(profile, 0x50, 0x10)
RIG_MLX5_LAYOUT(teardown_hca_in, 0x80, RIG_MLX5_TEARDOWN_HCA_IN)

#define RIG_MLX5_TEARDOWN_HCA_OUT(F, S)  \
    F(status,   0x0,  0x8)               \
    F(syndrome, 0x20, 0x20)              \
    F(state,    0x7f, 0x1)
RIG_MLX5_LAYOUT(teardown_hca_out, 0x80, RIG_MLX5_TEARDOWN_HCA_OUT)

enum class teardown_profile : std::uint16_t {  // MLX5_TEARDOWN_HCA_IN_PROFILE_*
    graceful_close = 0x0,
    force_close = 0x1,
    prepare_fast_teardown = 0x2,
};
enum class teardown_state : std::uint8_t {  // MLX5_TEARDOWN_HCA_OUT_FORCE_STATE_*
    success = 0x0,
    fail = 0x1,
};

// QUERY_ISSI (0x10a) / SET_ISSI (0x10b): supported_issi_dw0 bit 1 = ISSI 1 (kernel main.c
// mlx5_core_set_issi).
#define RIG_MLX5_QUERY_ISSI_IN(F, S)  \
    F(opcode, 0x0,  0x10)             \
    F(op_mod, 0x30, 0x10)
RIG_MLX5_LAYOUT(query_issi_in, 0x80, RIG_MLX5_QUERY_ISSI_IN)

#define RIG_MLX5_QUERY_ISSI_OUT(F, S)   \
    F(status,             0x0,   0x8)   \
    F(syndrome,           0x20,  0x20)  \
    F(current_issi,       0x50,  0x10)  \
    F(supported_issi_dw0, 0x360, 0x20)
RIG_MLX5_LAYOUT(query_issi_out, 0x380, RIG_MLX5_QUERY_ISSI_OUT)

#define RIG_MLX5_SET_ISSI_IN(F, S)  \
    F(opcode,       0x0,  0x10)     \
    F(op_mod,       0x30, 0x10)     \
    F(current_issi, 0x50, 0x10)
RIG_MLX5_LAYOUT(set_issi_in, 0x80, RIG_MLX5_SET_ISSI_IN)

#define RIG_MLX5_SET_ISSI_OUT(F, S)  \
    F(status,   0x0,  0x8)           \
    F(syndrome, 0x20, 0x20)
RIG_MLX5_LAYOUT(set_issi_out, 0x80, RIG_MLX5_SET_ISSI_OUT)

// QUERY_PAGES (0x107): num_pages is signed (negative: the firmware returns pages).
#define RIG_MLX5_QUERY_PAGES_IN(F, S)     \
    F(opcode,                0x0,  0x10)  \
    F(op_mod,                0x30, 0x10)  \
    F(embedded_cpu_function, 0x40, 0x1)   \
    F(function_id,           0x50, 0x10)
RIG_MLX5_LAYOUT(query_pages_in, 0x80, RIG_MLX5_QUERY_PAGES_IN)

#define RIG_MLX5_QUERY_PAGES_OUT(F, S)    \
    F(status,                0x0,  0x8)   \
    F(syndrome,              0x20, 0x20)  \
    F(embedded_cpu_function, 0x40, 0x1)   \
    F(function_id,           0x50, 0x10)  \
    F(num_pages,             0x60, 0x20)
RIG_MLX5_LAYOUT(query_pages_out, 0x80, RIG_MLX5_QUERY_PAGES_OUT)

enum class query_pages_op_mod : std::uint16_t {  // MLX5_QUERY_PAGES_IN_OP_MOD_*
    boot_pages = 0x1,
    init_pages = 0x2,
    regular_pages = 0x3,
};

// MANAGE_PAGES (0x108): the page addresses follow the fixed part, 64 bits each
// (pas_entry<manage_pages_in>(i), length_with_pas<manage_pages_in>(n)); on TAKE the returned
// ones follow manage_pages_out the same way.
#define RIG_MLX5_MANAGE_PAGES_IN(F, S)    \
    F(opcode,                0x0,  0x10)  \
    F(op_mod,                0x30, 0x10)  \
    F(embedded_cpu_function, 0x40, 0x1)   \
    F(function_id,           0x50, 0x10)  \
    F(input_num_entries,     0x60, 0x20)
RIG_MLX5_LAYOUT(manage_pages_in, 0x80, RIG_MLX5_MANAGE_PAGES_IN)

#define RIG_MLX5_MANAGE_PAGES_OUT(F, S)  \
    F(status,             0x0,  0x8)     \
    F(syndrome,           0x20, 0x20)    \
    F(output_num_entries, 0x40, 0x20)
RIG_MLX5_LAYOUT(manage_pages_out, 0x80, RIG_MLX5_MANAGE_PAGES_OUT)

enum class manage_pages_op_mod : std::uint16_t {  // MLX5_MANAGE_PAGES_IN_OP_MOD_*
    allocation_fail = 0x0,     // the driver could not give what was asked
    allocation_success = 0x1,  // GIVE
    hca_return_pages = 0x2,    // TAKE
};

// QUERY_HCA_CAP (0x100), op_mod = (cap_type << 1) | mode; SET_HCA_CAP (0x109), op_mod =
// cap_type << 1. The capability page is capability.cmd_hca_cap or capability.roce_cap.
#define RIG_MLX5_QUERY_HCA_CAP_IN(F, S)  \
    F(opcode,         0x0,  0x10)        \
    F(op_mod,         0x30, 0x10)        \
    F(other_function, 0x40, 0x1)         \
    F(ec_vf_function, 0x41, 0x1)         \
    F(function_id,    0x50, 0x10)
RIG_MLX5_LAYOUT(query_hca_cap_in, 0x80, RIG_MLX5_QUERY_HCA_CAP_IN)

#define RIG_MLX5_QUERY_HCA_CAP_OUT(F, S)  \
    F(status,     0x0,  0x8)              \
    F(syndrome,   0x20, 0x20)             \
    S(capability, 0x80, hca_cap_union)
RIG_MLX5_LAYOUT(query_hca_cap_out, 0x8080, RIG_MLX5_QUERY_HCA_CAP_OUT)

#define RIG_MLX5_SET_HCA_CAP_IN(F, S)       \
    F(opcode,         0x0,  0x10)           \
    F(op_mod,         0x30, 0x10)           \
    F(other_function, 0x40, 0x1)            \
    F(ec_vf_function, 0x41, 0x1)            \
    F(function_id,    0x50, 0x10)           \
    S(capability,     0x80, hca_cap_union)
RIG_MLX5_LAYOUT(set_hca_cap_in, 0x8080, RIG_MLX5_SET_HCA_CAP_IN)

#define RIG_MLX5_SET_HCA_CAP_OUT(F, S)  \
    F(status,   0x0,  0x8)              \
    F(syndrome, 0x20, 0x20)
RIG_MLX5_LAYOUT(set_hca_cap_out, 0x80, RIG_MLX5_SET_HCA_CAP_OUT)

enum class cap_type : std::uint16_t {  // MLX5_SET_HCA_CAP_OP_MOD_* (kernel enum mlx5_cap_type)
    general_device = 0x0,
    ethernet_offloads = 0x1,
    odp = 0x2,
    atomic = 0x3,
    roce = 0x4,
    ipsec = 0x15,
    general_device2 = 0x20,
    port_selection = 0x25,
};
enum class cap_mode : std::uint16_t { max = 0, cur = 1 };  // kernel HCA_CAP_OPMOD_GET_MAX/CUR
constexpr std::uint16_t query_hca_cap_op_mod(cap_type t, cap_mode m) noexcept {
    return static_cast<std::uint16_t>((static_cast<std::uint16_t>(t) << 1) | static_cast<std::uint16_t>(m));
}
constexpr std::uint16_t set_hca_cap_op_mod(cap_type t) noexcept {
    return static_cast<std::uint16_t>(static_cast<std::uint16_t>(t) << 1);
}
enum class port_type : std::uint8_t { ib = 0x0, ethernet = 0x1 };  // MLX5_CMD_HCA_CAP_PORT_TYPE_*
// cmd_hca_cap.cmdif_checksum (MLX5_CMD_HCA_CAP_CMDIF_CHECKSUM_*): MAX says what the device can
// do, CUR what it does. `enabled` = command-entry and mailbox signatures are checked and made
// by the device (kernel cmd.c verify_signature / calc_chain_sig).
enum class cmdif_checksum_mode : std::uint8_t { disabled = 0x0, initial_state = 0x1, enabled = 0x3 };

// NOP (0x80d): exercises the command path.
#define RIG_MLX5_NOP_IN(F, S)  \
    F(opcode, 0x0,  0x10)      \
    F(op_mod, 0x30, 0x10)
RIG_MLX5_LAYOUT(nop_in, 0x80, RIG_MLX5_NOP_IN)

#define RIG_MLX5_NOP_OUT(F, S)  \
    F(status,   0x0,  0x8)      \
    F(syndrome, 0x20, 0x20)
RIG_MLX5_LAYOUT(nop_out, 0x80, RIG_MLX5_NOP_OUT)

// QUERY_ADAPTER (0x101): the board's identity. The kernel reads it once after INIT_HCA
// (fw.c mlx5_query_board_id: vsd_contd_psid becomes dev->board_id, the PSID devlink reports
// as board.id; mlx5_core_query_vendor_id: ieee_vendor_id). vsd and the PSID are byte strings.
#define RIG_MLX5_QUERY_ADAPTER_IN(F, S)  \
    F(opcode, 0x0,  0x10)                \
    F(op_mod, 0x30, 0x10)
RIG_MLX5_LAYOUT(query_adapter_in, 0x80, RIG_MLX5_QUERY_ADAPTER_IN)

#define RIG_MLX5_QUERY_ADAPTER_PARAM_BLOCK(F, S)  \
    F(ieee_vendor_id, 0xc8,  0x18)                \
    F(vsd_vendor_id,  0xf0,  0x10)                \
    F(vsd,            0x100, 0x680)               \
    F(vsd_contd_psid, 0x780, 0x80)
RIG_MLX5_LAYOUT(query_adapter_param_block, 0x800, RIG_MLX5_QUERY_ADAPTER_PARAM_BLOCK)

#define RIG_MLX5_QUERY_ADAPTER_OUT(F, S)                     \
    F(status,               0x0,  0x8)                       \
    F(syndrome,             0x20, 0x20)                      \
    S(query_adapter_struct, 0x80, query_adapter_param_block)
RIG_MLX5_LAYOUT(query_adapter_out, 0x880, RIG_MLX5_QUERY_ADAPTER_OUT)

// ACCESS_REG (0x805): op_mod 0 = write, 1 = read; register_data (32-bit words) follows the
// fixed part in both directions. Registers used: HOST_ENDIANNESS 0x7004 (16 bytes, byte 0 =
// 0x00 on a little-endian host, 0x80 on a big-endian one; not in mlx5_ifc.h) and PAOS 0x5006.
#define RIG_MLX5_ACCESS_REGISTER_IN(F, S)  \
    F(opcode,      0x0,  0x10)             \
    F(op_mod,      0x30, 0x10)             \
    F(register_id, 0x50, 0x10)             \
    F(argument,    0x60, 0x20)
RIG_MLX5_LAYOUT(access_register_in, 0x80, RIG_MLX5_ACCESS_REGISTER_IN)

#define RIG_MLX5_ACCESS_REGISTER_OUT(F, S)  \
    F(status,   0x0,  0x8)                  \
    F(syndrome, 0x20, 0x20)
RIG_MLX5_LAYOUT(access_register_out, 0x80, RIG_MLX5_ACCESS_REGISTER_OUT)

namespace access_reg {
inline constexpr std::uint16_t op_mod_write = 0;
inline constexpr std::uint16_t op_mod_read = 1;
inline constexpr std::uint16_t reg_paos = 0x5006;
inline constexpr std::uint16_t reg_host_endianness = 0x7004;
inline constexpr std::size_t host_endianness_bytes = 16;
}  // namespace access_reg

// PAOS, port administrative and operational status: admin_status 1 up, 2 down, applied when ase
// = 1; oper_status reads back (rdma-core tests/mlx5_base.py access_paos_register;
// kernel mlx5/core/port.c mlx5_set_port_admin_status).
#define RIG_MLX5_PAOS_REG(F, S)  \
    F(swid,         0x0,  0x8)   \
    F(local_port,   0x8,  0x8)   \
    F(admin_status, 0x14, 0x4)   \
    F(oper_status,  0x1c, 0x4)   \
    F(ase,          0x20, 0x1)   \
    F(ee,           0x21, 0x1)   \
    F(e,            0x3e, 0x2)
RIG_MLX5_LAYOUT(paos_reg, 0x80, RIG_MLX5_PAOS_REG)

}  // namespace rig::mlx5::ifc
