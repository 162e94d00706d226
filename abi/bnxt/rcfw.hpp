#pragma once
// RCFW, the RoCE firmware channel (kernel roce_hsi.h; bnxt_re qplib_rcfw.c): commands go into
// the CMDQ, a host ring of 16-byte slots, each command `cmd_size` slots long and starting with
// `cmdq_base`; completions and asynchronous events come back as 16-byte CREQ entries.
//
// Command layouts are those of Linux 6.12 roce_hsi.h; see rcfw_cmds.hpp. This file holds the
// mailbox (`cmdq_init`), the command header, the CREQ entries and their decoder, and the writer
// that puts a command into the CMDQ ring.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <expected>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "abi/bnxt/layout.hpp"

namespace rig::bnxt::abi {

// ---- registers and sizes (qplib_rcfw.h RCFW_*, qplib_rcfw.c bnxt_qplib_enable_rcfw_channel) -----

inline constexpr std::size_t RCFW_COMM_BASE_OFFSET = 0x600;      // BAR0: cmdq_init goes here
inline constexpr std::size_t RCFW_PF_VF_COMM_PROD_OFFSET = 0xc;  // + base: CMDQ producer
inline constexpr std::size_t RCFW_COMM_TRIG_OFFSET = 0x100;      // + base: write 1
inline constexpr std::uint32_t RCFW_CMDQ_TRIG_VAL = 1;
inline constexpr std::uint32_t FIRMWARE_FIRST_FLAG = 1u << 31;   // first producer write after init
inline constexpr std::size_t cmdq_slot_size = 16;
inline constexpr std::size_t creq_entry_size = 16;

// cmdq_base.opcode (CMDQ_BASE_OPCODE_*); a completion's `event` is the same value.
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_CREATE_QP = 0x1;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_DESTROY_QP = 0x2;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_MODIFY_QP = 0x3;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_QUERY_QP = 0x4;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_CREATE_SRQ = 0x5;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_DESTROY_SRQ = 0x6;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_QUERY_SRQ = 0x8;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_CREATE_CQ = 0x9;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_DESTROY_CQ = 0xa;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_RESIZE_CQ = 0xc;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_ALLOCATE_MRW = 0xd;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_DEALLOCATE_KEY = 0xe;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_REGISTER_MR = 0xf;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_DEREGISTER_MR = 0x10;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_ADD_GID = 0x11;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_DELETE_GID = 0x12;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_CREATE_QP1 = 0x13;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_DESTROY_QP1 = 0x14;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_CREATE_AH = 0x15;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_DESTROY_AH = 0x16;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_MODIFY_GID = 0x17;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_QUERY_GID = 0x18;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_INITIALIZE_FW = 0x80;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_DEINITIALIZE_FW = 0x81;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_STOP_FUNC = 0x82;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_QUERY_FUNC = 0x83;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_SET_FUNC_RESOURCES = 0x84;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_READ_CONTEXT = 0x85;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_MAP_TC_TO_COS = 0x8a;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_QUERY_VERSION = 0x8b;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_MODIFY_ROCE_CC = 0x8c;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_QUERY_ROCE_CC = 0x8d;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_QUERY_ROCE_STATS = 0x8e;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_SET_LINK_AGGR_MODE = 0x8f;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_MODIFY_CQ = 0x90;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_QUERY_QP_EXTEND = 0x91;
inline constexpr std::uint8_t CMDQ_BASE_OPCODE_QUERY_ROCE_STATS_EXT = 0x92;

// The opcode's name without the CMDQ_BASE_OPCODE_ prefix, "" for one roce_hsi.h does not list.
constexpr std::string_view cmdq_opcode_name(std::uint8_t opcode) noexcept {
    switch (opcode) {
    case 0x1: return "CREATE_QP";
    case 0x2: return "DESTROY_QP";
    case 0x3: return "MODIFY_QP";
    case 0x4: return "QUERY_QP";
    case 0x5: return "CREATE_SRQ";
    case 0x6: return "DESTROY_SRQ";
    case 0x8: return "QUERY_SRQ";
    case 0x9: return "CREATE_CQ";
    case 0xa: return "DESTROY_CQ";
    case 0xc: return "RESIZE_CQ";
    case 0xd: return "ALLOCATE_MRW";
    case 0xe: return "DEALLOCATE_KEY";
    case 0xf: return "REGISTER_MR";
    case 0x10: return "DEREGISTER_MR";
    case 0x11: return "ADD_GID";
    case 0x12: return "DELETE_GID";
    case 0x13: return "CREATE_QP1";
    case 0x14: return "DESTROY_QP1";
    case 0x15: return "CREATE_AH";
    case 0x16: return "DESTROY_AH";
    case 0x17: return "MODIFY_GID";
    case 0x18: return "QUERY_GID";
    case 0x80: return "INITIALIZE_FW";
    case 0x81: return "DEINITIALIZE_FW";
    case 0x82: return "STOP_FUNC";
    case 0x83: return "QUERY_FUNC";
    case 0x84: return "SET_FUNC_RESOURCES";
    case 0x85: return "READ_CONTEXT";
    case 0x8a: return "MAP_TC_TO_COS";
    case 0x8b: return "QUERY_VERSION";
    case 0x8c: return "MODIFY_ROCE_CC";
    case 0x8d: return "QUERY_ROCE_CC";
    case 0x8e: return "QUERY_ROCE_STATS";
    case 0x8f: return "SET_LINK_AGGR_MODE";
    case 0x90: return "MODIFY_CQ";
    case 0x91: return "QUERY_QP_EXTEND";
    case 0x92: return "QUERY_ROCE_STATS_EXT";
    default: return "";
    }
}

// ---- CREQ: types, statuses, events (roce_hsi.h creq_*, qplib_rcfw.c) ----------------------------

inline constexpr std::uint8_t CREQ_BASE_TYPE_QP_EVENT = 0x38;
inline constexpr std::uint8_t CREQ_BASE_TYPE_FUNC_EVENT = 0x3a;

inline constexpr std::uint8_t CREQ_QP_EVENT_STATUS_SUCCESS = 0x0;
inline constexpr std::uint8_t CREQ_QP_EVENT_STATUS_FAIL = 0x1;
inline constexpr std::uint8_t CREQ_QP_EVENT_STATUS_RESOURCES = 0x2;
inline constexpr std::uint8_t CREQ_QP_EVENT_STATUS_INVALID_CMD = 0x3;
inline constexpr std::uint8_t CREQ_QP_EVENT_STATUS_NOT_IMPLEMENTED = 0x4;
inline constexpr std::uint8_t CREQ_QP_EVENT_STATUS_INVALID_PARAMETER = 0x5;
inline constexpr std::uint8_t CREQ_QP_EVENT_STATUS_HARDWARE_ERROR = 0x6;
inline constexpr std::uint8_t CREQ_QP_EVENT_STATUS_INTERNAL_ERROR = 0x7;

constexpr std::string_view creq_qp_event_status_name(std::uint8_t s) noexcept {
    switch (s) {
    case 0x0: return "SUCCESS";
    case 0x1: return "FAIL";
    case 0x2: return "RESOURCES";
    case 0x3: return "INVALID_CMD";
    case 0x4: return "NOT_IMPLEMENTED";
    case 0x5: return "INVALID_PARAMETER";
    case 0x6: return "HARDWARE_ERROR";
    case 0x7: return "INTERNAL_ERROR";
    default: return "";
    }
}

// Asynchronous QP events: they share type QP_EVENT with the command completions.
inline constexpr std::uint8_t CREQ_QP_EVENT_EVENT_QP_ERROR_NOTIFICATION = 0xc0;
inline constexpr std::uint8_t CREQ_QP_EVENT_EVENT_CQ_ERROR_NOTIFICATION = 0xc1;

// creq_func_event.event
inline constexpr std::uint8_t CREQ_FUNC_EVENT_EVENT_TX_WQE_ERROR = 0x1;
inline constexpr std::uint8_t CREQ_FUNC_EVENT_EVENT_TX_DATA_ERROR = 0x2;
inline constexpr std::uint8_t CREQ_FUNC_EVENT_EVENT_RX_WQE_ERROR = 0x3;
inline constexpr std::uint8_t CREQ_FUNC_EVENT_EVENT_RX_DATA_ERROR = 0x4;
inline constexpr std::uint8_t CREQ_FUNC_EVENT_EVENT_CQ_ERROR = 0x5;
inline constexpr std::uint8_t CREQ_FUNC_EVENT_EVENT_TQM_ERROR = 0x6;
inline constexpr std::uint8_t CREQ_FUNC_EVENT_EVENT_CFCQ_ERROR = 0x7;
inline constexpr std::uint8_t CREQ_FUNC_EVENT_EVENT_CFCS_ERROR = 0x8;
inline constexpr std::uint8_t CREQ_FUNC_EVENT_EVENT_CFCC_ERROR = 0x9;
inline constexpr std::uint8_t CREQ_FUNC_EVENT_EVENT_CFCM_ERROR = 0xa;
inline constexpr std::uint8_t CREQ_FUNC_EVENT_EVENT_TIM_ERROR = 0xb;
inline constexpr std::uint8_t CREQ_FUNC_EVENT_EVENT_VF_COMM_REQUEST = 0x80;
inline constexpr std::uint8_t CREQ_FUNC_EVENT_EVENT_RESOURCE_EXHAUSTED = 0x81;

constexpr bool creq_func_event_known(std::uint8_t e) noexcept {
    return (e >= 0x1 && e <= 0xb) || e == 0x80 || e == 0x81;
}

// creq_qp_error_notification reasons: the ones a driver reports by name (full list in roce_hsi.h
// creq_*, qplib_rcfw.c).
inline constexpr std::uint8_t CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_NO_ERROR = 0x0;
inline constexpr std::uint8_t
    CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_TIMEOUT_RETRY_LIMIT = 0x2;
inline constexpr std::uint8_t
    CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_RNR_TIMEOUT_RETRY_LIMIT = 0x3;
inline constexpr std::uint8_t CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_NAK_ARRIVAL_1 = 0x4;
inline constexpr std::uint8_t CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_NAK_ARRIVAL_2 = 0x5;
inline constexpr std::uint8_t CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_NAK_ARRIVAL_3 = 0x6;
inline constexpr std::uint8_t
    CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_TX_MEMORY_ERROR = 0x9;
inline constexpr std::uint8_t
    CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_WQE_FORMAT_ERROR = 0x11;
inline constexpr std::uint8_t
    CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_RETX_SETUP_ERROR = 0x1c;
inline constexpr std::uint8_t CREQ_QP_ERROR_NOTIFICATION_RES_ERR_STATE_REASON_NO_ERROR = 0x0;
inline constexpr std::uint8_t
    CREQ_QP_ERROR_NOTIFICATION_RES_ERR_STATE_REASON_RES_PAYLOAD_LENGTH_MISMATCH = 0x2;
inline constexpr std::uint8_t CREQ_QP_ERROR_NOTIFICATION_RES_ERR_STATE_REASON_RES_EXCEEDS_WQE =
    0x3;
inline constexpr std::uint8_t
    CREQ_QP_ERROR_NOTIFICATION_RES_ERR_STATE_REASON_RES_RX_INVALID_R_KEY = 0x6;
inline constexpr std::uint8_t
    CREQ_QP_ERROR_NOTIFICATION_RES_ERR_STATE_REASON_RES_RX_NO_PERMISSION = 0x8;
inline constexpr std::uint8_t
    CREQ_QP_ERROR_NOTIFICATION_RES_ERR_STATE_REASON_RES_WQE_FORMAT_ERROR = 0x16;

// ---- layouts -----------------------------------------------------------------------------------

// Written to BAR0 + RCFW_COMM_BASE_OFFSET as four 32-bit words to start the channel (qplib_rcfw.c
// bnxt_qplib_enable_rcfw_channel).
#define RIG_BNXT_CMDQ_INIT(W, D, F, A)                             \
    W(cmdq_pbl, std::uint64_t, 0)                                  \
    F(cmdq_lvl, std::uint16_t, 8, 0x0003, 0)                       \
    F(cmdq_size, std::uint16_t, 8, 0xfffc, 2)                      \
    W(creq_ring_id, std::uint16_t, 10)                             \
    W(prod_idx, std::uint32_t, 12)
RIG_BNXT_LAYOUT(cmdq_init, 16, RIG_BNXT_CMDQ_INIT);

// The command header every command starts with (roce_hsi.h cmdq_base); `cmd_size` counts 16-byte
// slots, the cookie comes back in the completion, resp_size/resp_addr name the side buffer (16-byte
// units).
#define RIG_BNXT_CMDQ_BASE(W, D, F, A)                             \
    W(opcode, std::uint8_t, 0)                                     \
    W(cmd_size, std::uint8_t, 1)                                   \
    W(flags, std::uint16_t, 2)                                     \
    W(cookie, std::uint16_t, 4)                                    \
    W(resp_size, std::uint8_t, 6)                                  \
    W(resp_addr, std::uint64_t, 8)
RIG_BNXT_LAYOUT(cmdq_base, 16, RIG_BNXT_CMDQ_BASE);

// A command framed in a TLV: bnxt_hsi.h's struct tlv (cmd_discr CMD_DISCR_TLV_ENCAP), then, as
// qplib_tlv.h's struct roce_tlv has it, the command's length in 16-byte slots at byte 8
// (total_size, the TLV header included) and padding to 16 bytes; the command's own cmdq_base
// follows at byte 16 (TLV_BYTES) with its opcode and cookie. bnxt_re frames MODIFY_ROCE_CC so
// (qplib_sp.c bnxt_qplib_modify_cc); the slot count of such a command is total_size, not the
// cmdq_base cmd_size its first bytes would otherwise be read as (qplib_rcfw.h
// bnxt_qplib_get_cmd_slots).
inline constexpr std::uint16_t CMD_DISCR_TLV_ENCAP = 0x8000;
inline constexpr std::size_t roce_tlv_total_size_offset = 8;
inline constexpr std::size_t roce_tlv_bytes = 16;
#define RIG_BNXT_TLV(W, D, F, A)                                   \
    W(cmd_discr, std::uint16_t, 0)                                 \
    W(reserved_8b, std::uint8_t, 2)                                \
    W(flags, std::uint8_t, 3)                                      \
    W(tlv_type, std::uint16_t, 4)                                  \
    W(length, std::uint16_t, 6)
RIG_BNXT_LAYOUT(tlv, 8, RIG_BNXT_TLV);

// The common part of the CREQ entries: type in bits 0-5 of byte 0, the valid (phase) bit in
// bit 0 of byte 8, the event at byte 9.
#define RIG_BNXT_CREQ_BASE(W, D, F, A)                             \
    F(type, std::uint8_t, 0, 0x3f, 0)                              \
    F(v, std::uint8_t, 8, 0x01, 0)                                 \
    W(event, std::uint8_t, 9)
RIG_BNXT_LAYOUT(creq_base, 16, RIG_BNXT_CREQ_BASE);

// A command completion: `event` is the command's opcode, `cookie` the command's cookie.
// Per-command data (xid, sizes) lives at bytes 4-7 and 10-15: decode the command's own
// creq_*_resp layout (rcfw_cmds.hpp) once the cookie has matched.
#define RIG_BNXT_CREQ_QP_EVENT(W, D, F, A)                         \
    F(type, std::uint8_t, 0, 0x3f, 0)                              \
    W(status, std::uint8_t, 1)                                     \
    W(cookie, std::uint16_t, 2)                                    \
    F(v, std::uint8_t, 8, 0x01, 0)                                 \
    W(event, std::uint8_t, 9)
RIG_BNXT_LAYOUT(creq_qp_event, 16, RIG_BNXT_CREQ_QP_EVENT);

#define RIG_BNXT_CREQ_QP_ERROR_NOTIFICATION(W, D, F, A)            \
    F(type, std::uint8_t, 0, 0x3f, 0)                              \
    W(status, std::uint8_t, 1)                                     \
    W(req_slow_path_state, std::uint8_t, 2)                        \
    W(req_err_state_reason, std::uint8_t, 3)                       \
    W(xid, std::uint32_t, 4)                                       \
    F(v, std::uint8_t, 8, 0x01, 0)                                 \
    W(event, std::uint8_t, 9)                                      \
    W(res_slow_path_state, std::uint8_t, 10)                       \
    W(res_err_state_reason, std::uint8_t, 11)                      \
    W(sq_cons_idx, std::uint16_t, 12)                              \
    W(rq_cons_idx, std::uint16_t, 14)
RIG_BNXT_LAYOUT(creq_qp_error_notification, 16, RIG_BNXT_CREQ_QP_ERROR_NOTIFICATION);

#define RIG_BNXT_CREQ_CQ_ERROR_NOTIFICATION(W, D, F, A)            \
    F(type, std::uint8_t, 0, 0x3f, 0)                              \
    W(status, std::uint8_t, 1)                                     \
    W(cq_err_reason, std::uint8_t, 2)                              \
    W(xid, std::uint32_t, 4)                                       \
    F(v, std::uint8_t, 8, 0x01, 0)                                 \
    W(event, std::uint8_t, 9)
RIG_BNXT_LAYOUT(creq_cq_error_notification, 16, RIG_BNXT_CREQ_CQ_ERROR_NOTIFICATION);

#define RIG_BNXT_CREQ_FUNC_EVENT(W, D, F, A)                       \
    F(type, std::uint8_t, 0, 0x3f, 0)                              \
    F(v, std::uint8_t, 8, 0x01, 0)                                 \
    W(event, std::uint8_t, 9)
RIG_BNXT_LAYOUT(creq_func_event, 16, RIG_BNXT_CREQ_FUNC_EVENT);

// ---- the CREQ decoder --------------------------------------------------------------------------

// Whether the CREQ entry is new for a consumer in `phase`: the phase starts at 1 and flips each
// time the consumer wraps (CREQ_CMP_VALID, roce_hsi.h creq_*, qplib_rcfw.c). Read the rest only
// after a read barrier.
inline bool creq_is_new(std::span<const std::byte> entry, bool phase) noexcept {
    return entry.size() > 8 && ((std::to_integer<unsigned>(entry[8]) & 1u) != 0) == phase;
}

using creq_entry = std::variant<creq_qp_event, creq_qp_error_notification,
                                creq_cq_error_notification, creq_func_event>;

// One CREQ entry: a command completion (event = a known opcode), a QP or CQ error
// notification, or a function event. A short buffer, an unknown type and an unknown event are
// error values: the device wrote something this driver cannot act on.
inline std::expected<creq_entry, decode_error> decode_creq(std::span<const std::byte> entry) {
    auto base = decode<creq_base>(entry);
    if (!base) {
        return std::unexpected(base.error());
    }
    if (base->type == CREQ_BASE_TYPE_FUNC_EVENT) {
        if (!creq_func_event_known(base->event)) {
            return std::unexpected(
                decode_error{decode_error::kind::unknown_event, "creq_func_event", base->event});
        }
        return creq_entry{*decode<creq_func_event>(entry)};
    }
    if (base->type != CREQ_BASE_TYPE_QP_EVENT) {
        return std::unexpected(
            decode_error{decode_error::kind::unknown_type, "creq_base", base->type});
    }
    if (base->event == CREQ_QP_EVENT_EVENT_QP_ERROR_NOTIFICATION) {
        return creq_entry{*decode<creq_qp_error_notification>(entry)};
    }
    if (base->event == CREQ_QP_EVENT_EVENT_CQ_ERROR_NOTIFICATION) {
        return creq_entry{*decode<creq_cq_error_notification>(entry)};
    }
    if (cmdq_opcode_name(base->event).empty()) {
        return std::unexpected(
            decode_error{decode_error::kind::unknown_event, "creq_qp_event", base->event});
    }
    return creq_entry{*decode<creq_qp_event>(entry)};
}

// ---- the CMDQ writer ---------------------------------------------------------------------------

// The slots a command of `bytes` bytes takes: the kernel rounds up and pads with zeros
// (bnxt_qplib_set_cmd_slots), so CREATE_CQ (56 bytes) takes 4.
constexpr std::size_t cmdq_slots(std::size_t bytes) noexcept {
    return (bytes + cmdq_slot_size - 1) / cmdq_slot_size;
}

// Puts command `cmd` (a cmdq_* layout) into the CMDQ ring `cmdq` at slot `at`, wrapping at the
// ring's end, and returns the slots it took; the padding after the command is zero. Refuses,
// before writing any byte: a ring that is not whole 16-byte slots, `at` outside it, a command
// longer than the ring, a cmd_size that is not the command's slot count, and any field value
// that does not fit its field.
template <class Cmd>
std::size_t write_cmdq(std::span<std::byte> cmdq, std::size_t at, const Cmd& cmd) {
    constexpr std::size_t slots = cmdq_slots(Cmd::layout_size);
    const std::size_t ring_slots = cmdq.size() / cmdq_slot_size;
    if (cmdq.size() % cmdq_slot_size != 0 || ring_slots == 0) {
        throw std::invalid_argument("cmdq: a ring of " + std::to_string(cmdq.size()) +
                                    " bytes is not whole 16-byte slots");
    }
    if (at >= ring_slots) {
        throw std::invalid_argument("cmdq: slot " + std::to_string(at) + " outside a ring of " +
                                    std::to_string(ring_slots) + " slots");
    }
    if (slots > ring_slots) {
        throw std::invalid_argument(std::string(Cmd::layout_name) + ": " +
                                    std::to_string(slots) + " slots do not fit a ring of " +
                                    std::to_string(ring_slots));
    }
    if (cmd.cmd_size != slots) {
        throw std::invalid_argument(std::string(Cmd::layout_name) + ".cmd_size: value " +
                                    std::to_string(cmd.cmd_size) + " is not the command's " +
                                    std::to_string(slots) + " slots");
    }
    std::array<std::byte, slots * cmdq_slot_size> bytes{};
    encode(std::span<std::byte>(bytes), cmd);   // validates every field before we touch the ring
    for (std::size_t i = 0; i < slots; ++i) {
        std::memcpy(cmdq.data() + ((at + i) % ring_slots) * cmdq_slot_size,
                    bytes.data() + i * cmdq_slot_size, cmdq_slot_size);
    }
    return slots;
}

}  // namespace rig::bnxt::abi

#include "abi/bnxt/rcfw_cmds.hpp"
