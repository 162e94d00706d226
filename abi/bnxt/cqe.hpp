#pragma once
// Completion queue entries (CQEs) of bnxt RoCE (kernel roce_hsi.h
// `cq_base`, `cq_req`, `cq_res_rc`, `cq_res_ud`, `cq_terminal`, `cq_cutoff`).
//
// Every CQE is 32 bytes; byte 24 holds the toggle (phase) bit in bit 0 and the CQE type in bits
// 1-4, byte 25 the status. A CQE at the consumer's index is new when its toggle equals the
// consumer's phase, which starts at 1 and flips each time the index wraps to 0. Status numbers
// depend on the type: the requester (send side) and responder (receive side) tables differ.
//
// decode_cqe() is for device-written memory: a short buffer or a type this driver does not take
// is an error value (decode_error), never an exception and never a read past the buffer.
#include <cstddef>
#include <cstdint>
#include <expected>
#include <span>
#include <string_view>
#include <variant>

#include "abi/bnxt/layout.hpp"

namespace rig::bnxt::abi {

inline constexpr std::size_t cqe_size = 32;

// cq_base.cqe_type (the field's value; the kernel's CQ_BASE_CQE_TYPE_* are these << 1)
inline constexpr std::uint8_t CQ_BASE_CQE_TYPE_REQ = 0x0;
inline constexpr std::uint8_t CQ_BASE_CQE_TYPE_RES_RC = 0x1;
inline constexpr std::uint8_t CQ_BASE_CQE_TYPE_RES_UD = 0x2;
inline constexpr std::uint8_t CQ_BASE_CQE_TYPE_RES_RAWETH_QP1 = 0x3;
inline constexpr std::uint8_t CQ_BASE_CQE_TYPE_RES_UD_CFA = 0x4;
inline constexpr std::uint8_t CQ_BASE_CQE_TYPE_REQ_V3 = 0x8;
inline constexpr std::uint8_t CQ_BASE_CQE_TYPE_RES_RC_V3 = 0x9;
inline constexpr std::uint8_t CQ_BASE_CQE_TYPE_NO_OP = 0xd;
inline constexpr std::uint8_t CQ_BASE_CQE_TYPE_TERMINAL = 0xe;
inline constexpr std::uint8_t CQ_BASE_CQE_TYPE_CUT_OFF = 0xf;

// cq_req.status: the send side
inline constexpr std::uint8_t CQ_REQ_STATUS_OK = 0x0;
inline constexpr std::uint8_t CQ_REQ_STATUS_BAD_RESPONSE_ERR = 0x1;
inline constexpr std::uint8_t CQ_REQ_STATUS_LOCAL_LENGTH_ERR = 0x2;
inline constexpr std::uint8_t CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR = 0x3;
inline constexpr std::uint8_t CQ_REQ_STATUS_LOCAL_PROTECTION_ERR = 0x4;
inline constexpr std::uint8_t CQ_REQ_STATUS_MEMORY_MGT_OPERATION_ERR = 0x5;
inline constexpr std::uint8_t CQ_REQ_STATUS_REMOTE_INVALID_REQUEST_ERR = 0x6;
inline constexpr std::uint8_t CQ_REQ_STATUS_REMOTE_ACCESS_ERR = 0x7;
inline constexpr std::uint8_t CQ_REQ_STATUS_REMOTE_OPERATION_ERR = 0x8;
inline constexpr std::uint8_t CQ_REQ_STATUS_RNR_NAK_RETRY_CNT_ERR = 0x9;
inline constexpr std::uint8_t CQ_REQ_STATUS_TRANSPORT_RETRY_CNT_ERR = 0xa;
inline constexpr std::uint8_t CQ_REQ_STATUS_WORK_REQUEST_FLUSHED_ERR = 0xb;

// cq_res_rc.status: the receive side
inline constexpr std::uint8_t CQ_RES_RC_STATUS_OK = 0x0;
inline constexpr std::uint8_t CQ_RES_RC_STATUS_LOCAL_ACCESS_ERROR = 0x1;
inline constexpr std::uint8_t CQ_RES_RC_STATUS_LOCAL_LENGTH_ERR = 0x2;
inline constexpr std::uint8_t CQ_RES_RC_STATUS_LOCAL_PROTECTION_ERR = 0x3;
inline constexpr std::uint8_t CQ_RES_RC_STATUS_LOCAL_QP_OPERATION_ERR = 0x4;
inline constexpr std::uint8_t CQ_RES_RC_STATUS_MEMORY_MGT_OPERATION_ERR = 0x5;
inline constexpr std::uint8_t CQ_RES_RC_STATUS_REMOTE_INVALID_REQUEST_ERR = 0x6;
inline constexpr std::uint8_t CQ_RES_RC_STATUS_WORK_REQUEST_FLUSHED_ERR = 0x7;
inline constexpr std::uint8_t CQ_RES_RC_STATUS_HW_FLUSH_ERR = 0x8;   // drivers skip these

// cq_res_rc.flags
inline constexpr std::uint16_t CQ_RES_RC_FLAGS_SRQ = 0x1;
inline constexpr std::uint16_t CQ_RES_RC_FLAGS_IMM = 0x2;
inline constexpr std::uint16_t CQ_RES_RC_FLAGS_INV = 0x4;
inline constexpr std::uint16_t CQ_RES_RC_FLAGS_RDMA = 0x8;   // RDMA WRITE with immediate

// cq_res_ud.status
inline constexpr std::uint8_t CQ_RES_UD_STATUS_OK = 0x0;
inline constexpr std::uint8_t CQ_RES_UD_STATUS_WORK_REQUEST_FLUSHED_ERR = 0x7;
inline constexpr std::uint8_t CQ_RES_UD_STATUS_HW_FLUSH_ERR = 0x8;

// The status's name without the CQ_REQ_STATUS_ prefix, "" for a value the table lacks.
constexpr std::string_view cq_req_status_name(std::uint8_t s) noexcept {
    switch (s) {
    case 0x0: return "OK";
    case 0x1: return "BAD_RESPONSE_ERR";
    case 0x2: return "LOCAL_LENGTH_ERR";
    case 0x3: return "LOCAL_QP_OPERATION_ERR";
    case 0x4: return "LOCAL_PROTECTION_ERR";
    case 0x5: return "MEMORY_MGT_OPERATION_ERR";
    case 0x6: return "REMOTE_INVALID_REQUEST_ERR";
    case 0x7: return "REMOTE_ACCESS_ERR";
    case 0x8: return "REMOTE_OPERATION_ERR";
    case 0x9: return "RNR_NAK_RETRY_CNT_ERR";
    case 0xa: return "TRANSPORT_RETRY_CNT_ERR";
    case 0xb: return "WORK_REQUEST_FLUSHED_ERR";
    default: return "";
    }
}

// The status's name without the CQ_RES_RC_STATUS_ prefix, "" for a value the table lacks.
constexpr std::string_view cq_res_rc_status_name(std::uint8_t s) noexcept {
    switch (s) {
    case 0x0: return "OK";
    case 0x1: return "LOCAL_ACCESS_ERROR";
    case 0x2: return "LOCAL_LENGTH_ERR";
    case 0x3: return "LOCAL_PROTECTION_ERR";
    case 0x4: return "LOCAL_QP_OPERATION_ERR";
    case 0x5: return "MEMORY_MGT_OPERATION_ERR";
    case 0x6: return "REMOTE_INVALID_REQUEST_ERR";
    case 0x7: return "WORK_REQUEST_FLUSHED_ERR";
    case 0x8: return "HW_FLUSH_ERR";
    default: return "";
    }
}

// ---- layouts ------------------------------------------------------------------------------------

#define RIG_BNXT_CQE_TAIL(W, F)                                    \
    F(toggle, std::uint8_t, 24, 0x01, 0)                           \
    F(cqe_type, std::uint8_t, 24, 0x1e, 1)                         \
    W(status, std::uint8_t, 25)

#define RIG_BNXT_CQ_BASE(W, D, F, A) RIG_BNXT_CQE_TAIL(W, F)
RIG_BNXT_LAYOUT(cq_base, 32, RIG_BNXT_CQ_BASE);

// Requester: completes every SQ entry up to sq_cons_idx (exclusive), aggregated (roce_hsi.h cq_req;
// qplib_fp.c).
#define RIG_BNXT_CQ_REQ(W, D, F, A)                                \
    W(qp_handle, std::uint64_t, 0)                                 \
    W(sq_cons_idx, std::uint16_t, 8)                               \
    RIG_BNXT_CQE_TAIL(W, F)                                        \
    F(push, std::uint8_t, 24, 0x20, 5)
RIG_BNXT_LAYOUT(cq_req, 32, RIG_BNXT_CQ_REQ);

#define RIG_BNXT_CQ_RES_RC(W, D, F, A)                             \
    W(length, std::uint32_t, 0)                                    \
    W(imm_data_or_inv_r_key, std::uint32_t, 4)                     \
    W(qp_handle, std::uint64_t, 8)                                 \
    W(mr_handle, std::uint64_t, 16)                                \
    RIG_BNXT_CQE_TAIL(W, F)                                        \
    W(flags, std::uint16_t, 26)                                    \
    F(srq_or_rq_wr_id, std::uint32_t, 28, 0x000fffff, 0)
RIG_BNXT_LAYOUT(cq_res_rc, 32, RIG_BNXT_CQ_RES_RC);

#define RIG_BNXT_CQ_RES_UD(W, D, F, A)                             \
    F(length, std::uint16_t, 0, 0x3fff, 0)                         \
    W(cfa_metadata, std::uint16_t, 2)                              \
    W(imm_data, std::uint32_t, 4)                                  \
    W(qp_handle, std::uint64_t, 8)                                 \
    A(src_mac, 16, 6)                                              \
    W(src_qp_low, std::uint16_t, 22)                               \
    RIG_BNXT_CQE_TAIL(W, F)                                        \
    W(flags, std::uint16_t, 26)                                    \
    F(srq_or_rq_wr_id, std::uint32_t, 28, 0x000fffff, 0)           \
    F(src_qp_high, std::uint32_t, 28, 0xff000000, 24)
RIG_BNXT_LAYOUT(cq_res_ud, 32, RIG_BNXT_CQ_RES_UD);

// The QP went to error: SQ entries up to sq_cons_idx completed, the rest flush (roce_hsi.h cq_req;
// qplib_fp.c).
#define RIG_BNXT_CQ_TERMINAL(W, D, F, A)                           \
    W(qp_handle, std::uint64_t, 0)                                 \
    W(sq_cons_idx, std::uint16_t, 8)                               \
    W(rq_cons_idx, std::uint16_t, 10)                              \
    RIG_BNXT_CQE_TAIL(W, F)
RIG_BNXT_LAYOUT(cq_terminal, 32, RIG_BNXT_CQ_TERMINAL);

// End of the old ring during RESIZE_CQ; acknowledged with CQ_CUTOFF_ACK(resize_toggle).
#define RIG_BNXT_CQ_CUTOFF(W, D, F, A)                             \
    RIG_BNXT_CQE_TAIL(W, F)                                        \
    F(resize_toggle, std::uint8_t, 24, 0x60, 5)
RIG_BNXT_LAYOUT(cq_cutoff, 32, RIG_BNXT_CQ_CUTOFF);

// NQ entry announcing a CQ (interrupt-driven completion only).
#define RIG_BNXT_NQ_CN(W, D, F, A)                                 \
    F(type, std::uint16_t, 0, 0x003f, 0)                           \
    F(toggle, std::uint16_t, 0, 0x00c0, 6)                         \
    W(cq_handle_low, std::uint32_t, 4)                             \
    F(v, std::uint32_t, 8, 0x00000001, 0)                          \
    W(cq_handle_high, std::uint32_t, 12)
RIG_BNXT_LAYOUT(nq_cn, 16, RIG_BNXT_NQ_CN);
inline constexpr std::uint8_t NQ_CN_TYPE_CQ_NOTIFICATION = 0x30;
// Whether NQ entry `consumer` (the unmasked count) of an NQ of `entries` (a power of two) is new:
// its v bit (byte 8, bit 0) equals the pass's phase, 1 on the first pass and flipped at each wrap
// (qplib_fp.c bnxt_qplib_service_nq, NQE_CMP_VALID). `v_byte` is byte 8 of the entry.
inline constexpr bool nqe_is_new(std::byte v_byte, std::uint64_t consumer, std::uint32_t entries) noexcept {
    const unsigned phase = ((consumer / entries) & 1) == 0 ? 1 : 0;
    return (std::to_integer<unsigned>(v_byte) & 1u) == phase;
}
inline constexpr std::size_t nqe_v_byte = 8;

// ---- the data path's readers ------------------------------------------------------------------
// The fields a data path reads of a CQE it found new (cqe_is_new, then a read barrier), straight
// from the 32 bytes without decode_cqe's variant: the same values (fast_path_test.cpp).
namespace fast {
[[gnu::always_inline]] inline std::uint8_t cqe_type(const std::byte* cqe) noexcept {
    return static_cast<std::uint8_t>(load(cqe, field_of<cq_base>("cqe_type")));
}
[[gnu::always_inline]] inline std::uint8_t status(const std::byte* cqe) noexcept {
    return static_cast<std::uint8_t>(load(cqe, field_of<cq_base>("status")));
}
// REQ and TERMINAL: qp_handle at 0, sq_cons_idx at 8; RES_RC: qp_handle at 8.
[[gnu::always_inline]] inline std::uint64_t req_qp_handle(const std::byte* cqe) noexcept {
    static_assert(field_of<cq_req>("qp_handle").off == field_of<cq_terminal>("qp_handle").off);
    return load(cqe, field_of<cq_req>("qp_handle"));
}
[[gnu::always_inline]] inline std::uint16_t sq_cons_idx(const std::byte* cqe) noexcept {
    static_assert(field_of<cq_req>("sq_cons_idx").off == field_of<cq_terminal>("sq_cons_idx").off);
    return static_cast<std::uint16_t>(load(cqe, field_of<cq_req>("sq_cons_idx")));
}
[[gnu::always_inline]] inline std::uint64_t res_qp_handle(const std::byte* cqe) noexcept {
    return load(cqe, field_of<cq_res_rc>("qp_handle"));
}
[[gnu::always_inline]] inline std::uint32_t res_length(const std::byte* cqe) noexcept {
    return static_cast<std::uint32_t>(load(cqe, field_of<cq_res_rc>("length")));
}
[[gnu::always_inline]] inline std::uint16_t res_flags(const std::byte* cqe) noexcept {
    return static_cast<std::uint16_t>(load(cqe, field_of<cq_res_rc>("flags")));
}
// RES_RC with flags IMM: the immediate, little-endian (bnxt_re_poll_success_rcqe swaps it to
// the wire's big-endian for verbs; Rig hands out host order)
[[gnu::always_inline]] inline std::uint32_t res_immediate(const std::byte* cqe) noexcept {
    return static_cast<std::uint32_t>(load(cqe, field_of<cq_res_rc>("imm_data_or_inv_r_key")));
}
[[gnu::always_inline]] inline std::uint32_t res_wr_id(const std::byte* cqe) noexcept {
    return static_cast<std::uint32_t>(load(cqe, field_of<cq_res_rc>("srq_or_rq_wr_id")));
}
}  // namespace fast

// ---- the decoder --------------------------------------------------------------------------------

// Whether the CQE is new for a consumer in `phase` (starts true, flips on each wrap).
// Read the rest of the CQE only after this and a read barrier.
inline bool cqe_is_new(std::span<const std::byte> cqe, bool phase) noexcept {
    return cqe.size() > 24 && ((std::to_integer<unsigned>(cqe[24]) & 1u) != 0) == phase;
}

using cqe = std::variant<cq_req, cq_res_rc, cq_res_ud, cq_terminal, cq_cutoff, cq_base>;

// One 32-byte CQE by its type: REQ, RES_RC, RES_UD, TERMINAL, CUT_OFF, or NO_OP (as cq_base).
// Other types (raw-Ethernet QP1, UD with CFA, the P8 "_V3" ones) are unknown_type errors: an RC
// driver never asked for them.
inline std::expected<cqe, decode_error> decode_cqe(std::span<const std::byte> b) {
    auto base = decode<cq_base>(b);
    if (!base) {
        return std::unexpected(base.error());
    }
    switch (base->cqe_type) {
    case CQ_BASE_CQE_TYPE_REQ: return cqe{*decode<cq_req>(b)};
    case CQ_BASE_CQE_TYPE_RES_RC: return cqe{*decode<cq_res_rc>(b)};
    case CQ_BASE_CQE_TYPE_RES_UD: return cqe{*decode<cq_res_ud>(b)};
    case CQ_BASE_CQE_TYPE_TERMINAL: return cqe{*decode<cq_terminal>(b)};
    case CQ_BASE_CQE_TYPE_CUT_OFF: return cqe{*decode<cq_cutoff>(b)};
    case CQ_BASE_CQE_TYPE_NO_OP: return cqe{*base};
    default:
        return std::unexpected(
            decode_error{decode_error::kind::unknown_type, "cq_base.cqe_type", base->cqe_type});
    }
}

}  // namespace rig::bnxt::abi
