#pragma once
// Vport and RoCE address commands: QUERY_VPORT_STATE (link state), QUERY/MODIFY_NIC_VPORT_CONTEXT
// (own MAC, roce_en) and SET/QUERY_ROCE_ADDRESS (GID table entries).
// Layouts after mlx5_ifc.h; their use as the kernel's mlx5/core/vport.c and lib/gid.c make it.
#include <cstdint>

#include "abi/mlx5/ifc/cmd.hpp"
#include "abi/mlx5/layout.hpp"

namespace rig::mlx5::ifc {

// QUERY_VPORT_STATE (0x750): state 1 = up; admin_state above it.
#define RIG_MLX5_QUERY_VPORT_STATE_IN(F, S)  \
    F(opcode,       0x0,  0x10)              \
    F(op_mod,       0x30, 0x10)              \
    F(other_vport,  0x40, 0x1)               \
    F(vport_number, 0x50, 0x10)
RIG_MLX5_LAYOUT(query_vport_state_in, 0x80, RIG_MLX5_QUERY_VPORT_STATE_IN)

#define RIG_MLX5_QUERY_VPORT_STATE_OUT(F, S)  \
    F(status,      0x0,  0x8)                 \
    F(syndrome,    0x20, 0x20)                \
    F(admin_state, 0x78, 0x4)                 \
    F(state,       0x7c, 0x4)
RIG_MLX5_LAYOUT(query_vport_state_out, 0x80, RIG_MLX5_QUERY_VPORT_STATE_OUT)

enum class vport_state : std::uint8_t { down = 0x0, up = 0x1 };  // MLX5_QUERY_VPORT_STATE_OUT_STATE_*

// mlx5_ifc.h mac_address_layout: a MAC as the last 6 bytes of 8.
#define RIG_MLX5_MAC_ADDRESS_LAYOUT(F, S)  \
    F(mac_addr_47_32, 0x10, 0x10)          \
    F(mac_addr_31_0,  0x20, 0x20)
RIG_MLX5_LAYOUT(mac_address_layout, 0x40, RIG_MLX5_MAC_ADDRESS_LAYOUT)

// mlx5_ifc.h nic_vport_context (256 bytes). The own MAC is permanent_address; the UC/MC address
// list (current_uc_mac_address, 64-bit entries) follows the fixed part.
#define RIG_MLX5_NIC_VPORT_CONTEXT(F, S)                      \
    F(min_wqe_inline_mode,        0x5,   0x3)                 \
    F(disable_mc_local_lb,        0x1d,  0x1)                 \
    F(disable_uc_local_lb,        0x1e,  0x1)                 \
    F(roce_en,                    0x1f,  0x1)                 \
    F(arm_change_event,           0x20,  0x1)                 \
    F(event_on_mtu,               0x3b,  0x1)                 \
    F(event_on_promisc_change,    0x3c,  0x1)                 \
    F(event_on_vlan_change,       0x3d,  0x1)                 \
    F(event_on_mc_address_change, 0x3e,  0x1)                 \
    F(event_on_uc_address_change, 0x3f,  0x1)                 \
    F(vhca_id_type,               0x40,  0x1)                 \
    F(affiliation_criteria,       0x4c,  0x4)                 \
    F(affiliated_vhca_id,         0x50,  0x10)                \
    F(sd_group,                   0x101, 0x3)                 \
    F(mtu,                        0x130, 0x10)                \
    F(system_image_guid,          0x140, 0x40)                \
    F(port_guid,                  0x180, 0x40)                \
    F(node_guid,                  0x1c0, 0x40)                \
    F(qkey_violation_counter,     0x340, 0x10)                \
    F(promisc_uc,                 0x780, 0x1)                 \
    F(promisc_mc,                 0x781, 0x1)                 \
    F(promisc_all,                0x782, 0x1)                 \
    F(allowed_list_type,          0x785, 0x3)                 \
    F(allowed_list_size,          0x794, 0xc)                 \
    S(permanent_address,          0x7a0, mac_address_layout)
RIG_MLX5_LAYOUT(nic_vport_context, 0x800, RIG_MLX5_NIC_VPORT_CONTEXT)

// mlx5_ifc.h modify_nic_vport_field_select: which nic_vport_context fields MODIFY applies.
#define RIG_MLX5_MODIFY_NIC_VPORT_FIELD_SELECT(F, S)  \
    F(affiliation,         0x12, 0x1)                 \
    F(disable_uc_local_lb, 0x14, 0x1)                 \
    F(disable_mc_local_lb, 0x15, 0x1)                 \
    F(node_guid,           0x16, 0x1)                 \
    F(port_guid,           0x17, 0x1)                 \
    F(min_inline,          0x18, 0x1)                 \
    F(mtu,                 0x19, 0x1)                 \
    F(change_event,        0x1a, 0x1)                 \
    F(promisc,             0x1b, 0x1)                 \
    F(permanent_address,   0x1c, 0x1)                 \
    F(addresses_list,      0x1d, 0x1)                 \
    F(roce_en,             0x1e, 0x1)
RIG_MLX5_LAYOUT(modify_nic_vport_field_select, 0x20, RIG_MLX5_MODIFY_NIC_VPORT_FIELD_SELECT)

// QUERY_NIC_VPORT_CONTEXT (0x754): other_vport 0 = this function.
#define RIG_MLX5_QUERY_NIC_VPORT_CONTEXT_IN(F, S)  \
    F(opcode,            0x0,  0x10)               \
    F(op_mod,            0x30, 0x10)               \
    F(other_vport,       0x40, 0x1)                \
    F(vport_number,      0x50, 0x10)               \
    F(allowed_list_type, 0x65, 0x3)
RIG_MLX5_LAYOUT(query_nic_vport_context_in, 0x80, RIG_MLX5_QUERY_NIC_VPORT_CONTEXT_IN)

#define RIG_MLX5_QUERY_NIC_VPORT_CONTEXT_OUT(F, S)  \
    F(status,            0x0,  0x8)                 \
    F(syndrome,          0x20, 0x20)                \
    S(nic_vport_context, 0x80, nic_vport_context)
RIG_MLX5_LAYOUT(query_nic_vport_context_out, 0x880, RIG_MLX5_QUERY_NIC_VPORT_CONTEXT_OUT)

// MODIFY_NIC_VPORT_CONTEXT (0x755): enable RoCE with field_select.roce_en = 1 and
// nic_vport_context.roce_en = 1.
#define RIG_MLX5_MODIFY_NIC_VPORT_CONTEXT_IN(F, S)              \
    F(opcode,            0x0,   0x10)                           \
    F(op_mod,            0x30,  0x10)                           \
    F(other_vport,       0x40,  0x1)                            \
    F(vport_number,      0x50,  0x10)                           \
    S(field_select,      0x60,  modify_nic_vport_field_select)  \
    S(nic_vport_context, 0x800, nic_vport_context)
RIG_MLX5_LAYOUT(modify_nic_vport_context_in, 0x1000, RIG_MLX5_MODIFY_NIC_VPORT_CONTEXT_IN)

#define RIG_MLX5_MODIFY_NIC_VPORT_CONTEXT_OUT(F, S)  \
    F(status,   0x0,  0x8)                           \
    F(syndrome, 0x20, 0x20)
RIG_MLX5_LAYOUT(modify_nic_vport_context_out, 0x80, RIG_MLX5_MODIFY_NIC_VPORT_CONTEXT_OUT)

// mlx5_ifc.h roce_addr_layout, one GID table entry: source_l3_address = the GID (IPv4 as
// ::ffff:a.b.c.d), source_mac_47_32/31_0 = own MAC, roce_version 0 = v1, 2 = v2, roce_l3_type
// 0 = IPv4, 1 = IPv6 (mlx5_ifc.h MLX5_ROCE_VERSION_*, MLX5_ROCE_L3_TYPE_*).
#define RIG_MLX5_ROCE_ADDR_LAYOUT(F, S)  \
    F(source_l3_address, 0x0,  0x80)     \
    F(vlan_valid,        0x83, 0x1)      \
    F(vlan_id,           0x84, 0xc)      \
    F(source_mac_47_32,  0x90, 0x10)     \
    F(source_mac_31_0,   0xa0, 0x20)     \
    F(roce_l3_type,      0xd4, 0x4)      \
    F(roce_version,      0xd8, 0x8)
RIG_MLX5_LAYOUT(roce_addr_layout, 0x100, RIG_MLX5_ROCE_ADDR_LAYOUT)

namespace roce_addr {
inline constexpr std::uint8_t version_1 = 0;  // kernel MLX5_ROCE_VERSION_1
inline constexpr std::uint8_t version_2 = 2;  // MLX5_ROCE_VERSION_2
inline constexpr std::uint8_t l3_type_ipv4 = 0;  // MLX5_ROCE_L3_TYPE_IPV4
inline constexpr std::uint8_t l3_type_ipv6 = 1;  // MLX5_ROCE_L3_TYPE_IPV6
}  // namespace roce_addr

// SET_ROCE_ADDRESS (0x761) / QUERY_ROCE_ADDRESS (0x760): roce_address_index is the GID index
// later named by ads.src_addr_index.
#define RIG_MLX5_SET_ROCE_ADDRESS_IN(F, S)         \
    F(opcode,             0x0,  0x10)              \
    F(op_mod,             0x30, 0x10)              \
    F(roce_address_index, 0x40, 0x10)              \
    F(vhca_port_num,      0x5c, 0x4)               \
    S(roce_address,       0x80, roce_addr_layout)
RIG_MLX5_LAYOUT(set_roce_address_in, 0x180, RIG_MLX5_SET_ROCE_ADDRESS_IN)

#define RIG_MLX5_SET_ROCE_ADDRESS_OUT(F, S)  \
    F(status,   0x0,  0x8)                   \
    F(syndrome, 0x20, 0x20)
RIG_MLX5_LAYOUT(set_roce_address_out, 0x80, RIG_MLX5_SET_ROCE_ADDRESS_OUT)

#define RIG_MLX5_QUERY_ROCE_ADDRESS_IN(F, S)  \
    F(opcode,             0x0,  0x10)         \
    F(op_mod,             0x30, 0x10)         \
    F(roce_address_index, 0x40, 0x10)         \
    F(vhca_port_num,      0x5c, 0x4)
RIG_MLX5_LAYOUT(query_roce_address_in, 0x80, RIG_MLX5_QUERY_ROCE_ADDRESS_IN)

#define RIG_MLX5_QUERY_ROCE_ADDRESS_OUT(F, S)  \
    F(status,       0x0,  0x8)                 \
    F(syndrome,     0x20, 0x20)                \
    S(roce_address, 0x80, roce_addr_layout)
RIG_MLX5_LAYOUT(query_roce_address_out, 0x180, RIG_MLX5_QUERY_ROCE_ADDRESS_OUT)

}  // namespace rig::mlx5::ifc
