#pragma once
// The 64-byte event queue entry and the events it reports (mlx5_ifc.h eqe and the members of
// union event_auto; event types of kernel device.h enum mlx5_event; kernel mlx5/core/eq.c).
//
// An EQE is valid when (owner & 1) == ((consumer_index / nent) & 1): EQEs are created with
// owner = 1 and the device writes 0 on its first pass.
#include <cstdint>
#include <string_view>

#include "abi/mlx5/layout.hpp"

namespace rig::mlx5::ifc {

// The per-type data, 28 bytes at EQE byte 0x20 (eqe.event_data).
// COMP (0x00): the CQ that has a new completion.
#define RIG_MLX5_COMP_EVENT(F, S)  \
    F(cq_number, 0xc8, 0x18)
RIG_MLX5_LAYOUT(comp_event, 0xe0, RIG_MLX5_COMP_EVENT)

// Path migration, communication established, SQ drained, WQ errors (0x01..0x13): the QP, RQ or
// SQ number, and in `type` which kind of object it is.
#define RIG_MLX5_QP_EVENTS(F, S)  \
    F(type,        0xa0, 0x8)     \
    F(qpn_rqn_sqn, 0xc8, 0x18)
RIG_MLX5_LAYOUT(qp_events, 0xe0, RIG_MLX5_QP_EVENTS)

// CQ_ERROR (0x04).
#define RIG_MLX5_CQ_ERROR(F, S)  \
    F(cqn,      0x8,  0x18)      \
    F(syndrome, 0x58, 0x8)
RIG_MLX5_LAYOUT(cq_error, 0xe0, RIG_MLX5_CQ_ERROR)

// PORT_CHANGE (0x09): port_num (bits 7:4 of EQE byte 0x28); eqe.event_sub_type says what
// changed (port_change_subtype).
#define RIG_MLX5_PORT_STATE_CHANGE_EVENT(F, S)  \
    F(port_num, 0x40, 0x4)
RIG_MLX5_LAYOUT(port_state_change_event, 0xe0, RIG_MLX5_PORT_STATE_CHANGE_EVENT)

// CMD (0x0a): bit i set = command queue slot i completed.
#define RIG_MLX5_CMD_INTER_COMP_EVENT(F, S)  \
    F(command_completion_vector, 0x0, 0x20)
RIG_MLX5_LAYOUT(cmd_inter_comp_event, 0xe0, RIG_MLX5_CMD_INTER_COMP_EVENT)

// PAGE_REQUEST (0x0b): num_pages is signed, > 0 give, < 0 take back. mlx5_ifc.h keeps this
// struct outside union event_auto, so there is no eqe.event_data.pages_req_event path in C:
// address it with eqe_page_request (the same bytes).
#define RIG_MLX5_PAGES_REQ_EVENT(F, S)  \
    F(function_id, 0x10, 0x10)          \
    F(num_pages,   0x20, 0x20)
RIG_MLX5_LAYOUT(pages_req_event, 0xe0, RIG_MLX5_PAGES_REQ_EVENT)

// mlx5_ifc.h union event_auto: the members above that C places in eqe.event_data.
#define RIG_MLX5_EVENT_AUTO(F, S)                             \
    S(comp_event,              0x0, comp_event)               \
    S(qp_events,               0x0, qp_events)                \
    S(cq_error,                0x0, cq_error)                 \
    S(port_state_change_event, 0x0, port_state_change_event)  \
    S(cmd_inter_comp_event,    0x0, cmd_inter_comp_event)
RIG_MLX5_LAYOUT(event_auto, 0xe0, RIG_MLX5_EVENT_AUTO)

#define RIG_MLX5_EQE(F, S)                \
    F(event_type,     0x8,   0x8)         \
    F(event_sub_type, 0x18,  0x8)         \
    S(event_data,     0x100, event_auto)  \
    F(signature,      0x1f0, 0x8)         \
    F(owner,          0x1ff, 0x1)
RIG_MLX5_LAYOUT(eqe, 0x200, RIG_MLX5_EQE)

inline constexpr ::rig::abi::nested<pages_req_event> eqe_page_request{eqe::event_data.off};

// Whether EQE `consumer_index` of an EQ of 2^log_size entries is software's: its owner bit (bit 0
// of byte 0x3f) equals the pass parity of the index (kernel lib/eq.h next_eqe_sw).
inline constexpr bool eqe_owned_by_software(std::uint8_t owner_byte, std::uint32_t consumer_index,
                                            std::uint32_t log_size) noexcept {
    return (owner_byte & 1u) == ((consumer_index >> log_size) & 1u);
}

// ---- event types (eqe.event_type; kernel device.h MLX5_EVENT_TYPE_*) ---------------------
// DROPPED_PACKET_LOGGED (0x1f) is named only by mlx5_ifc.h (MLX5_EVENT_TYPE_CODING_...).
#define RIG_MLX5_EVENT_TYPES(X)                                  \
    X(comp,                  COMP,                  0x00)        \
    X(path_mig,              PATH_MIG,              0x01)        \
    X(comm_est,              COMM_EST,              0x02)        \
    X(sq_drained,            SQ_DRAINED,            0x03)        \
    X(cq_error,              CQ_ERROR,              0x04)        \
    X(wq_catas_error,        WQ_CATAS_ERROR,        0x05)        \
    X(path_mig_failed,       PATH_MIG_FAILED,       0x07)        \
    X(internal_error,        INTERNAL_ERROR,        0x08)        \
    X(port_change,           PORT_CHANGE,           0x09)        \
    X(cmd,                   CMD,                   0x0a)        \
    X(page_request,          PAGE_REQUEST,          0x0b)        \
    X(page_fault,            PAGE_FAULT,            0x0c)        \
    X(nic_vport_change,      NIC_VPORT_CHANGE,      0x0d)        \
    X(esw_functions_changed, ESW_FUNCTIONS_CHANGED, 0x0e)        \
    X(vhca_state_change,     VHCA_STATE_CHANGE,     0x0f)        \
    X(wq_inval_req_error,    WQ_INVAL_REQ_ERROR,    0x10)        \
    X(wq_access_error,       WQ_ACCESS_ERROR,       0x11)        \
    X(srq_catas_error,       SRQ_CATAS_ERROR,       0x12)        \
    X(srq_last_wqe,          SRQ_LAST_WQE,          0x13)        \
    X(srq_rq_limit,          SRQ_RQ_LIMIT,          0x14)        \
    X(gpio_event,            GPIO_EVENT,            0x15)        \
    X(port_module_event,     PORT_MODULE_EVENT,     0x16)        \
    X(temp_warn_event,       TEMP_WARN_EVENT,       0x17)        \
    X(xrq_error,             XRQ_ERROR,             0x18)        \
    X(remote_config,         REMOTE_CONFIG,         0x19)        \
    X(db_bf_congestion,      DB_BF_CONGESTION,      0x1a)        \
    X(stall_event,           STALL_EVENT,           0x1b)        \
    X(dct_drained,           DCT_DRAINED,           0x1c)        \
    X(dct_key_violation,     DCT_KEY_VIOLATION,     0x1d)        \
    X(dropped_packet_logged, DROPPED_PACKET_LOGGED, 0x1f)        \
    X(fpga_error,            FPGA_ERROR,            0x20)        \
    X(fpga_qp_error,         FPGA_QP_ERROR,         0x21)        \
    X(general_event,         GENERAL_EVENT,         0x22)        \
    X(monitor_counter,       MONITOR_COUNTER,       0x24)        \
    X(pps_event,             PPS_EVENT,             0x25)        \
    X(device_tracer,         DEVICE_TRACER,         0x26)        \
    X(object_change,         OBJECT_CHANGE,         0x27)

enum class event_type : std::uint8_t {
#define RIG_MLX5_EVENT_ENUM(name, kname, value) name = value,
    RIG_MLX5_EVENT_TYPES(RIG_MLX5_EVENT_ENUM)
#undef RIG_MLX5_EVENT_ENUM
};
inline constexpr event_type all_event_types[] = {
#define RIG_MLX5_EVENT_LIST(name, kname, value) event_type::name,
    RIG_MLX5_EVENT_TYPES(RIG_MLX5_EVENT_LIST)
#undef RIG_MLX5_EVENT_LIST
};
// "PAGE_REQUEST" etc. (the suffix of MLX5_EVENT_TYPE_*), or "unknown event type".
constexpr std::string_view to_string(event_type t) noexcept {
    switch (t) {
#define RIG_MLX5_EVENT_CASE(name, kname, value) \
    case event_type::name:                      \
        return #kname;
        RIG_MLX5_EVENT_TYPES(RIG_MLX5_EVENT_CASE)
#undef RIG_MLX5_EVENT_CASE
    }
    return "unknown event type";
}

// mlx5_ifc.h names many of the same values MLX5_EVENT_TYPE_CODING_*: the tests pin these.
struct event_type_coding {
    event_type type;
    std::string_view coding;  // suffix after MLX5_EVENT_TYPE_CODING_
};
inline constexpr event_type_coding event_type_codings[] = {
    {event_type::comp, "COMPLETION_EVENTS"},
    {event_type::path_mig, "PATH_MIGRATED_SUCCEEDED"},
    {event_type::comm_est, "COMMUNICATION_ESTABLISHED"},
    {event_type::sq_drained, "SEND_QUEUE_DRAINED"},
    {event_type::cq_error, "CQ_ERROR"},
    {event_type::wq_catas_error, "LOCAL_WQ_CATASTROPHIC_ERROR"},
    {event_type::path_mig_failed, "PATH_MIGRATION_FAILED"},
    {event_type::internal_error, "INTERNAL_ERROR"},
    {event_type::port_change, "PORT_STATE_CHANGE"},
    {event_type::cmd, "COMMAND_INTERFACE_COMPLETION"},
    {event_type::page_request, "PAGE_REQUEST"},
    {event_type::page_fault, "PAGE_FAULT_EVENT"},
    {event_type::wq_inval_req_error, "INVALID_REQUEST_LOCAL_WQ_ERROR"},
    {event_type::wq_access_error, "LOCAL_ACCESS_VIOLATION_WQ_ERROR"},
    {event_type::srq_catas_error, "LOCAL_SRQ_CATASTROPHIC_ERROR"},
    {event_type::srq_last_wqe, "LAST_WQE_REACHED"},
    {event_type::srq_rq_limit, "SRQ_LIMIT"},
    {event_type::gpio_event, "GPIO_EVENT"},
    {event_type::remote_config, "REMOTE_CONFIGURATION_PROTOCOL_EVENT"},
    {event_type::db_bf_congestion, "DOORBELL_BLUEFLAME_CONGESTION_EVENT"},
    {event_type::stall_event, "STALL_VL_EVENT"},
    {event_type::dct_drained, "DCT_ALL_CONNECTIONS_CLOSED"},
    {event_type::dct_key_violation, "DCT_ACCESS_KEY_VIOLATION"},
    {event_type::dropped_packet_logged, "DROPPED_PACKET_LOGGED_EVENT"},
    {event_type::fpga_error, "FPGA_ERROR"},
    {event_type::fpga_qp_error, "FPGA_QP_ERROR"},
};

// eqe.event_sub_type of PORT_CHANGE (kernel device.h MLX5_PORT_CHANGE_SUBTYPE_*).
enum class port_change_subtype : std::uint8_t {
    down = 1,
    active = 4,
    initialized = 5,
    lid = 6,
    pkey = 7,
    guid = 8,
    client_rereg = 9,
};

inline constexpr std::uint8_t eqe_owner_init = 1;  // kernel MLX5_EQE_OWNER_INIT_VAL

}  // namespace rig::mlx5::ifc
