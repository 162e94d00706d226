// Completions of the bnxt data path: the RC engine's neutral completions written as 32-byte
// CQEs into the CQs' memory, the NQ entry of an armed CQ, and a failed QP's ERR state and CREQ
// QP_ERROR_NOTIFICATION (docs/bnxt-data-path.md "Completions", "Completion events";
// roce_hsi.h cq_req, cq_res_rc, nq_cn; qplib_fp.c bnxt_qplib_cq_process_req,
// bnxt_qplib_cq_process_res_rc, bnxt_qplib_service_nq; main.c bnxt_re_handle_qp_async_event).
//
// CQE k goes to slot k mod cq_size with toggle 1 on the first pass through the ring, 0 on the
// second, ... (bnxt_re_is_cqe_valid); its body is written first, and the byte holding toggle and
// type with the pass's others, in order, at its end (sim/vfio_user/polled_bytes.hpp). The model
// never writes over a CQE the driver's CQ doorbells have not passed: while a CQ is full its
// completions stay in the rc_qp.
#include <array>
#include <cstring>

#include "abi/barriers.hpp"
#include "abi/bnxt/cqe.hpp"
#include "abi/bnxt/rcfw_cmds.hpp"
#include "sim/bnxt/datapath.hpp"
#include "sim/bnxt/function_model.hpp"
#include "sim/vfio_user/dma_space.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::bnxt {

namespace {

namespace abi = ::rig::bnxt::abi;
using st = roce::completion_status;

constexpr std::size_t toggle_byte = 24;   // cq_base: toggle bit 0, cqe_type bits 1-4

// The requester table (roce_hsi.h CQ_REQ_STATUS_*), which the drivers map onto ibv_wc_status.
std::uint8_t req_status(st s) noexcept {
    switch (s) {
    case st::success: return abi::CQ_REQ_STATUS_OK;
    case st::local_length: return abi::CQ_REQ_STATUS_LOCAL_LENGTH_ERR;
    case st::local_qp_operation: return abi::CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR;
    case st::local_protection: return abi::CQ_REQ_STATUS_LOCAL_PROTECTION_ERR;
    case st::remote_access: return abi::CQ_REQ_STATUS_REMOTE_ACCESS_ERR;
    case st::remote_invalid_request: return abi::CQ_REQ_STATUS_REMOTE_INVALID_REQUEST_ERR;
    case st::remote_operation: return abi::CQ_REQ_STATUS_REMOTE_OPERATION_ERR;
    case st::retry_exceeded: return abi::CQ_REQ_STATUS_TRANSPORT_RETRY_CNT_ERR;
    case st::rnr_retry_exceeded: return abi::CQ_REQ_STATUS_RNR_NAK_RETRY_CNT_ERR;
    case st::flushed: return abi::CQ_REQ_STATUS_WORK_REQUEST_FLUSHED_ERR;
    }
    return abi::CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR;
}

// The responder table (CQ_RES_RC_STATUS_*): a receive fails locally or by the sender's request.
std::uint8_t res_status(st s) noexcept {
    switch (s) {
    case st::success: return abi::CQ_RES_RC_STATUS_OK;
    case st::local_length: return abi::CQ_RES_RC_STATUS_LOCAL_LENGTH_ERR;
    case st::local_protection: return abi::CQ_RES_RC_STATUS_LOCAL_PROTECTION_ERR;
    case st::remote_invalid_request: return abi::CQ_RES_RC_STATUS_REMOTE_INVALID_REQUEST_ERR;
    case st::flushed: return abi::CQ_RES_RC_STATUS_WORK_REQUEST_FLUSHED_ERR;
    default: return abi::CQ_RES_RC_STATUS_LOCAL_QP_OPERATION_ERR;
    }
}

// QP_ERROR_NOTIFICATION's requester reason for the send side's first error (roce_hsi.h; the NAK
// arrivals are numbered by the IB NAK code: 1 invalid request, 2 remote access, 3 remote
// operational, as main.c bnxt_re_handle_qp_async_event groups them). Model's judgement.
std::uint8_t req_reason(st s) noexcept {
    switch (s) {
    case st::success:
    case st::flushed: return abi::CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_NO_ERROR;
    case st::local_qp_operation: return abi::CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_WQE_FORMAT_ERROR;
    case st::remote_invalid_request: return abi::CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_NAK_ARRIVAL_1;
    case st::remote_access: return abi::CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_NAK_ARRIVAL_2;
    case st::remote_operation: return abi::CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_NAK_ARRIVAL_3;
    case st::retry_exceeded: return abi::CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_TIMEOUT_RETRY_LIMIT;
    case st::rnr_retry_exceeded: return abi::CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_RNR_TIMEOUT_RETRY_LIMIT;
    default: return abi::CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_TX_MEMORY_ERROR;
    }
}

// The responder reason: the receive side's first error, or, when the responder failed with no
// receive of its own (an RDMA WRITE or READ it refused), RX_INVALID_R_KEY. Model's judgement.
std::uint8_t res_reason(st receive, st send) noexcept {
    switch (receive) {
    case st::local_length: return abi::CREQ_QP_ERROR_NOTIFICATION_RES_ERR_STATE_REASON_RES_EXCEEDS_WQE;
    case st::local_protection: return abi::CREQ_QP_ERROR_NOTIFICATION_RES_ERR_STATE_REASON_RES_RX_NO_PERMISSION;
    case st::success:
    case st::flushed:
        return send == st::success ? abi::CREQ_QP_ERROR_NOTIFICATION_RES_ERR_STATE_REASON_RES_RX_INVALID_R_KEY
                                   : abi::CREQ_QP_ERROR_NOTIFICATION_RES_ERR_STATE_REASON_NO_ERROR;
    default: return abi::CREQ_QP_ERROR_NOTIFICATION_RES_ERR_STATE_REASON_RES_WQE_FORMAT_ERROR;
    }
}

}  // namespace

std::uint32_t datapath::room(const cq_slot& c) noexcept {
    return c.cq->entries - positions_between(c.consumer, c.producer, c.cq->entries);
}

// Each side's completions while its CQ has room (a CQ that is full keeps them in the rc_qp).
bool datapath::drain_completions(qp_slot& s) {
    bool did = false;
    roce::completion c;
    while ((s.send_cq == nullptr || room(*s.send_cq) > 0) && s.rc->take(roce::completion_side::send, c)) {
        did = true;
        send_cqe(s, c);
    }
    while ((s.receive_cq == nullptr || room(*s.receive_cq) > 0) && s.rc->take(roce::completion_side::receive, c)) {
        did = true;
        receive_cqe(s, c);
    }
    return did;
}

// A REQ CQE completing every WQE up to c.index (qplib_fp.c bnxt_qplib_cq_process_req: the loop
// stops at sq_cons_idx). Flushed WQEs get none: the driver flushes them itself (__flush_sq).
bool datapath::send_cqe(qp_slot& s, const roce::completion& c) {
    if (c.status != st::success && c.status != st::flushed && s.send_error == st::success) {
        s.send_error = c.status;
    }
    if (c.status == st::flushed || s.send_cq == nullptr) {
        return false;
    }
    s.sq_cons = static_cast<std::uint16_t>(slot_of(c.index + 1, s.q->sq_entries));   // index: a slot
    abi::cq_req e{};
    e.qp_handle = s.q->handle;
    e.sq_cons_idx = s.sq_cons;
    e.cqe_type = abi::CQ_BASE_CQE_TYPE_REQ;
    e.status = req_status(c.status);
    auto b = abi::to_bytes(e);
    return write_cqe(*s.send_cq, b);
}

// A RES_RC CQE per receive; a flushed one only as HW_FLUSH_ERR with hw_flush_cqes (drivers skip
// those: bnxt_re_poll_err_rcqe; the driver flushes its RQ itself, __flush_rq).
bool datapath::receive_cqe(qp_slot& s, const roce::completion& c) {
    s.rq_cons = static_cast<std::uint16_t>(slot_of(c.index + 1, s.q->rq_entries));
    std::uint8_t status = res_status(c.status);
    if (c.status == st::flushed) {
        if (!_fn._options.hw_flush_cqes) {
            return false;
        }
        status = abi::CQ_RES_RC_STATUS_HW_FLUSH_ERR;
    } else if (c.status != st::success && s.receive_error == st::success) {
        s.receive_error = c.status;
    }
    if (s.receive_cq == nullptr) {
        return false;
    }
    abi::cq_res_rc e{};
    e.length = c.byte_len;
    e.qp_handle = s.q->handle;
    e.cqe_type = abi::CQ_BASE_CQE_TYPE_RES_RC;
    e.status = status;
    e.srq_or_rq_wr_id = (c.index < s.wr_ids.size() ? s.wr_ids[c.index] : 0) & 0xfffff;   // a slot (fetch_receives)
    if (c.status == st::success && c.with_immediate) {
        // IMM, and RDMA for a WRITE with immediate; the value little-endian (rdma-core
        // bnxt_re_poll_success_rcqe: imm_data = htobe32(le32toh(imm_key)))
        e.flags = static_cast<std::uint16_t>(abi::CQ_RES_RC_FLAGS_IMM |
                                             (c.op == roce::work_op::write ? abi::CQ_RES_RC_FLAGS_RDMA : 0));
        e.imm_data_or_inv_r_key = c.immediate;
    }
    auto b = abi::to_bytes(e);
    return write_cqe(*s.receive_cq, b);
}

bool datapath::write_cqe(cq_slot& c, std::span<std::byte, 32> cqe) {
    const std::uint32_t size = c.cq->entries;
    if (room(c) == 0) {
        return false;   // drain_completions asked first: never so
    }
    const bool toggle = c.producer < size;   // the pass over the ring: 1 first
    cqe[toggle_byte] = (cqe[toggle_byte] & std::byte{0xfe}) | std::byte{toggle ? std::uint8_t{1} : std::uint8_t{0}};
    // 32 bytes at a multiple of 32 never cross a page (every page size is a multiple of 32)
    const std::uint64_t at = c.cq->memory.address(std::uint64_t{slot_of(c.producer, size)} * abi::cqe_size);
    const std::span<const std::byte> e(cqe);
    if (std::byte* slot = at == 0 ? nullptr : _dma->writable(at, abi::cqe_size); slot != nullptr) {
        // the body now, the toggle byte with the pass's others (vfio_user/polled_bytes.hpp)
        std::memcpy(slot, e.data(), toggle_byte);
        std::memcpy(slot + toggle_byte + 1, e.data() + toggle_byte + 1, abi::cqe_size - toggle_byte - 1);
        _toggles.hold(slot + toggle_byte, e[toggle_byte]);
    } else {
        _toggles.publish();   // the CQEs before it first: CQEs become valid in order
        if (at == 0 || !_dma->write(at, e.first(toggle_byte)) ||
            !_dma->write(at + toggle_byte + 1, e.subspan(toggle_byte + 1))) {
            log().warn("bnxt data path: CQE {} of CQ {} is outside the DMA mappings: dropped", slot_of(c.producer, size),
                       c.id);
            return false;
        }
        rig::abi::barrier::model_publish();   // the body before the toggle the driver polls
        if (!_dma->write(at + toggle_byte, e.subspan(toggle_byte, 1))) {
            return false;
        }
    }
    c.producer = position_after(c.producer, size);
    _cqes.store(_cqes.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (c.armed) {
        notify(c);
    }
    return true;
}

// An nq_cn for CQ `c` at its NQ's producer (type CQ_NOTIFICATION, the CQ's cq_handle, the NQ's
// phase); the CQ is disarmed. An armed RoCE NQ raises its vector and is disarmed; the CREQ (a CQ
// may name it) raises its vector on every entry, as for its commands.
void datapath::notify(cq_slot& c) {
    _toggles.publish();   // the NQ entry follows the CQEs it announces
    c.armed = false;
    abi::nq_cn n{};
    n.type = abi::NQ_CN_TYPE_CQ_NOTIFICATION;
    n.cq_handle_low = static_cast<std::uint32_t>(c.cq->handle);
    n.cq_handle_high = static_cast<std::uint32_t>(c.cq->handle >> 32);
    auto b = abi::to_bytes(n);
    if (!_fn._fw.nq_post(c.cq->nq, b, _dma)) {
        return;
    }
    _notes.store(_notes.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (const auto v = _fn._fw.announce(c.cq->nq)) {   // the NQ's vector, when armed
        raise(*v);
    }
}

void datapath::raise(std::uint16_t vector) {
    _fn.raise_locked(vector);
}

// The rc_qp failed: the QP goes to ERR (QUERY_QP shows it) with a CREQ QP_ERROR_NOTIFICATION
// (firmware::rcfw_qp_error, function_model::qp_error's path), unless the driver moved it
// itself (MODIFY_QP to ERR: no notification).
void datapath::report_error(qp_slot& s) {
    s.reported = true;
    if (s.q->state != abi::CMDQ_MODIFY_QP_NEW_STATE_RTR && s.q->state != abi::CMDQ_MODIFY_QP_NEW_STATE_RTS) {
        return;
    }
    // a retransmission the PSN search entry could not locate: RETX_SETUP_ERROR (model's judgement)
    const std::uint8_t req = s.retransmit_lost ? abi::CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_RETX_SETUP_ERROR
                                               : req_reason(s.send_error);
    for (const std::uint16_t v : _fn._fw.rcfw_qp_error(s.id, req,
                                                       res_reason(s.receive_error, s.send_error), s.sq_cons,
                                                       s.rq_cons, _dma)) {
        raise(v);
    }
}

}  // namespace rig::sim::bnxt
