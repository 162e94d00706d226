#pragma once
// Every mlx5 firmware-command layout of abi/mlx5/ifc/, and the tables the tests walk to pin
// them, byte for byte, to the kernel's include/linux/mlx5/mlx5_ifc.h (test/unit/mlx5_ifc/):
//  - all_layouts: each layout with the kernel struct it must equal (mlx5_ifc_<c_name>_bits);
//  - flex_arrays: where each trailing flexible array starts, and its element width;
//  - kernel_constants: our enumerations next to the kernel's names for the same values.
#include <cstdint>
#include <span>
#include <string_view>

#include "abi/mlx5/ifc/cmd.hpp"
#include "abi/mlx5/ifc/cmdq.hpp"
#include "abi/mlx5/ifc/eqe.hpp"
#include "abi/mlx5/ifc/hca.hpp"
#include "abi/mlx5/ifc/hca_cap.hpp"
#include "abi/mlx5/ifc/init_seg.hpp"
#include "abi/mlx5/ifc/qp.hpp"
#include "abi/mlx5/ifc/queues.hpp"
#include "abi/mlx5/ifc/resources.hpp"
#include "abi/mlx5/ifc/vport.hpp"

namespace rig::mlx5::ifc {

struct layout_info {
    std::string_view c_name;                  // the kernel's struct/union mlx5_ifc_<c_name>_bits
    std::span<const ::rig::abi::named_field> fields;
    std::uint32_t size_bits;
    std::string_view name;                    // ours: the same, but for mbox_in/mbox_out
    bool is_union = false;                    // a C union (its members overlap)
};

template <class L>
constexpr layout_info info(std::string_view c_name = L::name, bool is_union = false) {
    return {c_name, L::fields, L::size_bits, L::name, is_union};
}

inline constexpr layout_info all_layouts[] = {
    // cmd.hpp: the common headers exist only in rdma-core's copy; the kernel structs that are
    // exactly the header stand for them.
    info<mbox_in>("alloc_pd_in"),
    info<mbox_out>("dealloc_pd_out"),
    // cmdq.hpp
    info<cmd_queue_entry>(),
    info<cmd_if_box>(),
    // init_seg.hpp
    info<health_buffer>(),
    info<initial_seg>(),
    // hca_cap.hpp
    info<cmd_hca_cap>(),
    info<roce_cap>(),
    info<hca_cap_union>("hca_cap_union", true),
    // hca.hpp
    info<enable_hca_in>(),
    info<enable_hca_out>(),
    info<disable_hca_in>(),
    info<disable_hca_out>(),
    info<init_hca_in>(),
    info<init_hca_out>(),
    info<teardown_hca_in>(),
    info<teardown_hca_out>(),
    info<query_issi_in>(),
    info<query_issi_out>(),
    info<set_issi_in>(),
    info<set_issi_out>(),
    info<query_pages_in>(),
    info<query_pages_out>(),
    info<manage_pages_in>(),
    info<manage_pages_out>(),
    info<query_hca_cap_in>(),
    info<query_hca_cap_out>(),
    info<set_hca_cap_in>(),
    info<set_hca_cap_out>(),
    info<nop_in>(),
    info<nop_out>(),
    info<query_adapter_in>(),
    info<query_adapter_param_block>(),
    info<query_adapter_out>(),
    info<access_register_in>(),
    info<access_register_out>(),
    info<paos_reg>(),
    // resources.hpp
    info<alloc_uar_in>(),
    info<alloc_uar_out>(),
    info<dealloc_uar_in>(),
    info<dealloc_uar_out>(),
    info<alloc_pd_in>(),
    info<alloc_pd_out>(),
    info<dealloc_pd_in>(),
    info<dealloc_pd_out>(),
    info<mkc>(),
    info<create_mkey_in>(),
    info<create_mkey_out>(),
    info<destroy_mkey_in>(),
    info<destroy_mkey_out>(),
    // queues.hpp
    info<eqc>(),
    info<create_eq_in>(),
    info<create_eq_out>(),
    info<destroy_eq_in>(),
    info<destroy_eq_out>(),
    info<cqc>(),
    info<create_cq_in>(),
    info<create_cq_out>(),
    info<destroy_cq_in>(),
    info<destroy_cq_out>(),
    // qp.hpp
    info<ads>(),
    info<qpc>(),
    info<create_qp_in>(),
    info<create_qp_out>(),
    info<destroy_qp_in>(),
    info<destroy_qp_out>(),
    info<rst2init_qp_in>(),
    info<rst2init_qp_out>(),
    info<init2rtr_qp_in>(),
    info<init2rtr_qp_out>(),
    info<rtr2rts_qp_in>(),
    info<rtr2rts_qp_out>(),
    info<rts2rts_qp_in>(),
    info<rts2rts_qp_out>(),
    info<qp_2err_in>(),
    info<qp_2err_out>(),
    info<qp_2rst_in>(),
    info<qp_2rst_out>(),
    info<query_qp_in>(),
    info<query_qp_out>(),
    // vport.hpp
    info<query_vport_state_in>(),
    info<query_vport_state_out>(),
    info<mac_address_layout>(),
    info<nic_vport_context>(),
    info<modify_nic_vport_field_select>(),
    info<query_nic_vport_context_in>(),
    info<query_nic_vport_context_out>(),
    info<modify_nic_vport_context_in>(),
    info<modify_nic_vport_context_out>(),
    info<roce_addr_layout>(),
    info<set_roce_address_in>(),
    info<set_roce_address_out>(),
    info<query_roce_address_in>(),
    info<query_roce_address_out>(),
    // eqe.hpp
    info<comp_event>(),
    info<qp_events>(),
    info<cq_error>(),
    info<port_state_change_event>(),
    info<cmd_inter_comp_event>(),
    info<pages_req_event>(),
    info<event_auto>("event_auto", true),
    info<eqe>(),
};

// Trailing flexible arrays: our helper's idea of where element 0 lies, and its width, against
// offsetof/sizeof of <c_name>.<path>[0] in the kernel header.
struct flex_array {
    std::string_view c_name;
    std::string_view path;
    ::rig::abi::field first;  // element 0
};
inline constexpr flex_array flex_arrays[] = {
    {"manage_pages_in", "pas", pas_entry<manage_pages_in>(0)},
    {"manage_pages_out", "pas", pas_entry<manage_pages_out>(0)},
    {"access_register_in", "register_data", flex_entry(access_register_in::size_bits, 32, 0)},
    {"access_register_out", "register_data", flex_entry(access_register_out::size_bits, 32, 0)},
    {"create_mkey_in", "klm_pas_mtt", flex_entry(create_mkey_in::size_bits, 32, 0)},
    {"create_eq_in", "pas", pas_entry<create_eq_in>(0)},
    {"create_cq_in", "pas", pas_entry<create_cq_in>(0)},
    {"create_qp_in", "pas", pas_entry<create_qp_in>(0)},
    {"query_qp_out", "qp_pas_or_qpc_ext_and_pas.qp_pas_list.pas", query_qp_out_pas(0)},
    {"nic_vport_context", "current_uc_mac_address", pas_entry<nic_vport_context>(0)},
    {"query_nic_vport_context_out", "nic_vport_context.current_uc_mac_address",
     query_nic_vport_context_out::nic_vport_context(pas_entry<nic_vport_context>(0))},
    {"modify_nic_vport_context_in", "nic_vport_context.current_uc_mac_address",
     modify_nic_vport_context_in::nic_vport_context(pas_entry<nic_vport_context>(0))},
};

// Our constants under the kernel's names (enumerators of mlx5_ifc.h). Opcodes and event types
// are pinned from their own tables (all_opcodes, event_type_codings).
struct kernel_constant {
    std::string_view c_name;
    std::uint64_t value;
};
#define RIG_MLX5_K(c_name, value) ::rig::mlx5::ifc::kernel_constant{c_name, static_cast<std::uint64_t>(value)}
inline constexpr kernel_constant kernel_constants[] = {
    RIG_MLX5_K("MLX5_CMD_QUEUE_ENTRY_TYPE_PCIE_CMD_IF_TRANSPORT", cmdq::pcie_cmd_if_transport),
    RIG_MLX5_K("MLX5_INITIAL_SEG_NIC_INTERFACE_FULL_DRIVER", init_seg::nic_interface::full_driver),
    RIG_MLX5_K("MLX5_INITIAL_SEG_NIC_INTERFACE_DISABLED", init_seg::nic_interface::disabled),
    RIG_MLX5_K("MLX5_INITIAL_SEG_NIC_INTERFACE_NO_DRAM_NIC", init_seg::nic_interface::no_dram_nic),
    RIG_MLX5_K("MLX5_INITIAL_SEG_NIC_INTERFACE_SW_RESET", init_seg::nic_interface::sw_reset),
#define RIG_MLX5_HSYND_K(name, kname, value) \
    RIG_MLX5_K("MLX5_INITIAL_SEG_HEALTH_SYNDROME_" #kname, init_seg::health_syndrome::name),
    RIG_MLX5_HEALTH_SYNDROMES(RIG_MLX5_HSYND_K)
#undef RIG_MLX5_HSYND_K
    RIG_MLX5_K("MLX5_TEARDOWN_HCA_IN_PROFILE_GRACEFUL_CLOSE", teardown_profile::graceful_close),
    RIG_MLX5_K("MLX5_TEARDOWN_HCA_IN_PROFILE_FORCE_CLOSE", teardown_profile::force_close),
    RIG_MLX5_K("MLX5_TEARDOWN_HCA_IN_PROFILE_PREPARE_FAST_TEARDOWN", teardown_profile::prepare_fast_teardown),
    RIG_MLX5_K("MLX5_TEARDOWN_HCA_OUT_FORCE_STATE_SUCCESS", teardown_state::success),
    RIG_MLX5_K("MLX5_TEARDOWN_HCA_OUT_FORCE_STATE_FAIL", teardown_state::fail),
    RIG_MLX5_K("MLX5_QUERY_PAGES_IN_OP_MOD_BOOT_PAGES", query_pages_op_mod::boot_pages),
    RIG_MLX5_K("MLX5_QUERY_PAGES_IN_OP_MOD_INIT_PAGES", query_pages_op_mod::init_pages),
    RIG_MLX5_K("MLX5_QUERY_PAGES_IN_OP_MOD_REGULAR_PAGES", query_pages_op_mod::regular_pages),
    RIG_MLX5_K("MLX5_MANAGE_PAGES_IN_OP_MOD_ALLOCATION_FAIL", manage_pages_op_mod::allocation_fail),
    RIG_MLX5_K("MLX5_MANAGE_PAGES_IN_OP_MOD_ALLOCATION_SUCCESS", manage_pages_op_mod::allocation_success),
    RIG_MLX5_K("MLX5_MANAGE_PAGES_IN_OP_MOD_HCA_RETURN_PAGES", manage_pages_op_mod::hca_return_pages),
    RIG_MLX5_K("MLX5_SET_HCA_CAP_OP_MOD_GENERAL_DEVICE", cap_type::general_device),
    RIG_MLX5_K("MLX5_SET_HCA_CAP_OP_MOD_ETHERNET_OFFLOADS", cap_type::ethernet_offloads),
    RIG_MLX5_K("MLX5_SET_HCA_CAP_OP_MOD_ODP", cap_type::odp),
    RIG_MLX5_K("MLX5_SET_HCA_CAP_OP_MOD_ATOMIC", cap_type::atomic),
    RIG_MLX5_K("MLX5_SET_HCA_CAP_OP_MOD_ROCE", cap_type::roce),
    RIG_MLX5_K("MLX5_SET_HCA_CAP_OP_MOD_IPSEC", cap_type::ipsec),
    RIG_MLX5_K("MLX5_SET_HCA_CAP_OP_MOD_GENERAL_DEVICE2", cap_type::general_device2),
    RIG_MLX5_K("MLX5_SET_HCA_CAP_OP_MOD_PORT_SELECTION", cap_type::port_selection),
    RIG_MLX5_K("MLX5_CMD_HCA_CAP_PORT_TYPE_IB", port_type::ib),
    RIG_MLX5_K("MLX5_CMD_HCA_CAP_PORT_TYPE_ETHERNET", port_type::ethernet),
    RIG_MLX5_K("MLX5_MKC_ACCESS_MODE_PA", mkc_access_mode::pa),
    RIG_MLX5_K("MLX5_MKC_ACCESS_MODE_MTT", mkc_access_mode::mtt),
    RIG_MLX5_K("MLX5_MKC_ACCESS_MODE_KLMS", mkc_access_mode::klms),
    RIG_MLX5_K("MLX5_MKC_ACCESS_MODE_KSM", mkc_access_mode::ksm),
    RIG_MLX5_K("MLX5_MKC_ACCESS_MODE_SW_ICM", mkc_access_mode::sw_icm),
    RIG_MLX5_K("MLX5_MKC_ACCESS_MODE_MEMIC", mkc_access_mode::memic),
    RIG_MLX5_K("MLX5_MKC_ACCESS_MODE_CROSSING", mkc_access_mode::crossing),
    RIG_MLX5_K("MLX5_EQC_ST_ARMED", eqc_st::armed),
    RIG_MLX5_K("MLX5_EQC_ST_FIRED", eqc_st::fired),
    RIG_MLX5_K("MLX5_CQC_CQE_SZ_64_BYTES", cqc_cqe_sz::bytes_64),
    RIG_MLX5_K("MLX5_CQC_CQE_SZ_128_BYTES", cqc_cqe_sz::bytes_128),
    RIG_MLX5_K("MLX5_CQC_ST_SOLICITED_NOTIFICATION_REQUEST_ARMED", cqc_st::solicited_notification_request_armed),
    RIG_MLX5_K("MLX5_CQC_ST_NOTIFICATION_REQUEST_ARMED", cqc_st::notification_request_armed),
    RIG_MLX5_K("MLX5_CQC_ST_FIRED", cqc_st::fired),
    RIG_MLX5_K("MLX5_QPC_ST_RC", qpc_st::rc),
    RIG_MLX5_K("MLX5_QPC_ST_UC", qpc_st::uc),
    RIG_MLX5_K("MLX5_QPC_ST_UD", qpc_st::ud),
    RIG_MLX5_K("MLX5_QPC_ST_XRC", qpc_st::xrc),
    RIG_MLX5_K("MLX5_QPC_ST_DCI", qpc_st::dci),
    RIG_MLX5_K("MLX5_QPC_ST_QP0", qpc_st::qp0),
    RIG_MLX5_K("MLX5_QPC_ST_QP1", qpc_st::qp1),
    RIG_MLX5_K("MLX5_QPC_ST_RAW_DATAGRAM", qpc_st::raw_datagram),
    RIG_MLX5_K("MLX5_QPC_ST_REG_UMR", qpc_st::reg_umr),
    RIG_MLX5_K("MLX5_QPC_STATE_RST", qpc_state::rst),
    RIG_MLX5_K("MLX5_QPC_STATE_INIT", qpc_state::init),
    RIG_MLX5_K("MLX5_QPC_STATE_RTR", qpc_state::rtr),
    RIG_MLX5_K("MLX5_QPC_STATE_RTS", qpc_state::rts),
    RIG_MLX5_K("MLX5_QPC_STATE_SQER", qpc_state::sqer),
    RIG_MLX5_K("MLX5_QPC_STATE_ERR", qpc_state::err),
    RIG_MLX5_K("MLX5_QPC_STATE_SQD", qpc_state::sqd),
    RIG_MLX5_K("MLX5_QPC_STATE_SUSPENDED", qpc_state::suspended),
    RIG_MLX5_K("MLX5_QPC_PM_STATE_ARMED", qpc_pm_state::armed),
    RIG_MLX5_K("MLX5_QPC_PM_STATE_REARM", qpc_pm_state::rearm),
    RIG_MLX5_K("MLX5_QPC_PM_STATE_RESERVED", qpc_pm_state::reserved),
    RIG_MLX5_K("MLX5_QPC_PM_STATE_MIGRATED", qpc_pm_state::migrated),
    RIG_MLX5_K("MLX5_QPC_MTU_256_BYTES", qpc_mtu::bytes_256),
    RIG_MLX5_K("MLX5_QPC_MTU_512_BYTES", qpc_mtu::bytes_512),
    RIG_MLX5_K("MLX5_QPC_MTU_1K_BYTES", qpc_mtu::bytes_1k),
    RIG_MLX5_K("MLX5_QPC_MTU_2K_BYTES", qpc_mtu::bytes_2k),
    RIG_MLX5_K("MLX5_QPC_MTU_4K_BYTES", qpc_mtu::bytes_4k),
    RIG_MLX5_K("MLX5_QPC_MTU_RAW_ETHERNET_QP", qpc_mtu::raw_ethernet_qp),
    RIG_MLX5_K("MLX5_QPC_ATOMIC_MODE_IB_SPEC", qpc_atomic_mode::ib_spec),
    RIG_MLX5_K("MLX5_QPC_ATOMIC_MODE_ONLY_8B", qpc_atomic_mode::only_8b),
    RIG_MLX5_K("MLX5_QPC_ATOMIC_MODE_UP_TO_8B", qpc_atomic_mode::up_to_8b),
    RIG_MLX5_K("MLX5_QPC_ATOMIC_MODE_UP_TO_16B", qpc_atomic_mode::up_to_16b),
    RIG_MLX5_K("MLX5_QPC_ATOMIC_MODE_UP_TO_32B", qpc_atomic_mode::up_to_32b),
    RIG_MLX5_K("MLX5_QPC_ATOMIC_MODE_UP_TO_64B", qpc_atomic_mode::up_to_64b),
    RIG_MLX5_K("MLX5_QPC_ATOMIC_MODE_UP_TO_128B", qpc_atomic_mode::up_to_128b),
    RIG_MLX5_K("MLX5_QPC_ATOMIC_MODE_UP_TO_256B", qpc_atomic_mode::up_to_256b),
    RIG_MLX5_K("MLX5_QUERY_VPORT_STATE_OUT_STATE_DOWN", vport_state::down),
    RIG_MLX5_K("MLX5_QUERY_VPORT_STATE_OUT_STATE_UP", vport_state::up),
};
#undef RIG_MLX5_K

}  // namespace rig::mlx5::ifc
