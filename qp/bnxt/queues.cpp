// Construction checks and completion handling of the bnxt send, receive and completion queues,
// the PSN search entries, and the errors entries carry (qp/bnxt/data_path.hpp).
#include "qp/bnxt/data_path.hpp"

#include <bit>
#include <string>

#include "abi/bits.hpp"

namespace rig::qp::bnxt {

namespace {

[[noreturn]] void refuse(const std::string& what) { throw std::invalid_argument(what); }

// Number of `unit`-byte entries in `ring`, checked: a power of two in 2..max_entries (a bnxt
// ring keeps one entry free, so one entry would hold none).
std::uint32_t entries_of(std::span<std::byte> ring, std::size_t unit, std::size_t max_entries, const char* what) {
    const std::size_t n = ring.size() / unit;
    if (ring.size() % unit != 0 || n < 2 || n > max_entries || !std::has_single_bit(n)) {
        refuse(std::string(what) + ": " + std::to_string(ring.size()) + " bytes is not 2^n (2.." +
               std::to_string(max_entries) + ") entries of " + std::to_string(unit) + " bytes");
    }
    check_aligned(ring.data(), unit < 64 ? unit : 64, what);
    return static_cast<std::uint32_t>(n);
}

std::uint32_t xid_of(std::uint32_t id, const char* what) {
    if (id > 0xfffff) {   // dbc_dbc.xid: 20 bits
        refuse(std::string(what) + ": id " + ::rig::abi::hex(id) + " over the doorbell's 20-bit xid");
    }
    return id;
}

// SQ and RQ sizes: BNXT_QPLIB_MAX_SQSZ is 0xffff, so 2^15 WQEs at most.
constexpr std::size_t max_queue_entries = std::size_t{1} << 15;
constexpr std::size_t max_cq_entries = std::size_t{1} << 24;

std::uint32_t log2_of(std::uint64_t mask) { return static_cast<std::uint32_t>(std::countr_one(mask)); }

}  // namespace

// ---- errors ------------------------------------------------------------------------------------

entry_error reported_failure(std::uint8_t code) noexcept {
    return {"the NIC reported the queue pair's failure (CREQ QP_ERROR_NOTIFICATION)", code, 0, true};
}
entry_error requester_error(std::uint8_t status) noexcept {
    const std::string_view name = abi::cq_req_status_name(status);
    return {name.empty() ? std::string_view("requester CQE status unknown to roce_hsi.h") : name, status, 0, false};
}
entry_error responder_error(std::uint8_t status) noexcept {
    const std::string_view name = abi::cq_res_rc_status_name(status);
    return {name.empty() ? std::string_view("responder CQE status unknown to roce_hsi.h") : name, status, 0, false};
}
entry_error terminal_error() noexcept {
    return {"TERMINAL CQE: the queue pair went to the error state", 0, 0, true};
}
entry_error unexpected_completion() noexcept {
    return {"completion of a kind this ring does not take", 0, 0, false};
}

// ---- send queue ---------------------------------------------------------------------------------

send_queue::send_queue(send_queue_memory m, std::uint32_t qpn)
    : ring_(m.ring),
      psn_search_(m.psn_search),
      mask_(entries_of(m.ring, wqe_bytes, max_queue_entries, "send queue ring") - 1),
      log_size_(log2_of(mask_)),
      doorbell_(m.doorbell),
      qpn_(xid_of(qpn, "send queue")),
      entries_(static_cast<std::uint32_t>(mask_ + 1), static_cast<std::uint32_t>(mask_)) {
    if (m.psn_search.size() != (mask_ + 1) * abi::sq_psn_search_ext::layout_size) {
        refuse("send queue: PSN search area of " + std::to_string(m.psn_search.size()) + " bytes, " +
               std::to_string((mask_ + 1) * abi::sq_psn_search_ext::layout_size) + " needed (16 per WQE)");
    }
    check_aligned(m.doorbell, 8, "send queue doorbell");
}

void send_queue::complete(std::uint8_t status, std::uint16_t sq_cons_idx) noexcept {
    if (entries_.failed()) {
        return;   // what the NIC says after the failure changes no result
    }
    const auto n = last_covered(sq_cons_idx);
    if (!n) [[unlikely]] {
        entries_.fail(unexpected_completion());
        return;
    }
    if (status == abi::CQ_REQ_STATUS_OK) [[likely]] {
        entries_.complete_through(*n, std::nullopt);   // a send's result is its posted length
    } else if (status == abi::CQ_REQ_STATUS_WORK_REQUEST_FLUSHED_ERR) {
        entries_.fail_flushed_at(*n, requester_error(status));
    } else {
        entries_.fail_at(*n, requester_error(status));
    }
}

void send_queue::terminal(std::uint16_t sq_cons_idx, entry_error e) noexcept {
    if (entries_.failed()) {
        return;
    }
    if (const auto n = last_covered(sq_cons_idx)) {
        entries_.complete_through(*n, std::nullopt);
    }
    entries_.fail(e);
}

// ---- receive queue ------------------------------------------------------------------------------

receive_queue::receive_queue(receive_queue_memory m, std::uint32_t qpn)
    : ring_(m.ring),
      mask_(entries_of(m.ring, wqe_bytes, max_queue_entries, "receive queue ring") - 1),
      log_size_(log2_of(mask_)),
      doorbell_(m.doorbell),
      qpn_(xid_of(qpn, "receive queue")),
      entries_(static_cast<std::uint32_t>(mask_ + 1), static_cast<std::uint32_t>(mask_)) {
    check_aligned(m.doorbell, 8, "receive queue doorbell");
}

void receive_queue::complete(std::uint8_t status, std::uint16_t flags, std::uint32_t wr_id, std::uint32_t length,
                             std::uint32_t immediate) noexcept {
    if (entries_.failed() || status == abi::CQ_RES_RC_STATUS_HW_FLUSH_ERR) {
        return;   // after the failure, and the NIC's own flushes: skipped (bnxt_re_poll_err_rcqe)
    }
    const auto n = entries_.resolve(wr_id, 20);
    if (!n || (flags & abi::CQ_RES_RC_FLAGS_SRQ) != 0) [[unlikely]] {
        entries_.fail(unexpected_completion());
        return;
    }
    if (status == abi::CQ_RES_RC_STATUS_OK) [[likely]] {
        if ((flags & abi::CQ_RES_RC_FLAGS_IMM) != 0) [[unlikely]] {
            // RDMA too: a WRITE with immediate consumed it (bnxt_re_poll_success_rcqe:
            // IBV_WC_RECV_RDMA_WITH_IMM), its length the WRITE's
            entries_.note_immediate(*n, immediate, (flags & abi::CQ_RES_RC_FLAGS_RDMA) != 0 ? rig::operation::write_imm
                                                                                             : rig::operation::receive);
        }
        entries_.complete_through(*n, length);
    } else if (status == abi::CQ_RES_RC_STATUS_WORK_REQUEST_FLUSHED_ERR) {
        entries_.fail_flushed_at(*n, responder_error(status));
    } else {
        entries_.fail_at(*n, responder_error(status));
    }
}

// ---- completion queue ---------------------------------------------------------------------------

completion_queue::completion_queue(completion_queue_memory m, std::uint32_t cqn)
    : ring_(m.ring),
      mask_(entries_of(m.ring, abi::cqe_size, max_cq_entries, "completion queue ring") - 1),
      log_size_(log2_of(mask_)),
      doorbell_(m.doorbell),
      arm_doorbell_(m.arm_doorbell),
      cqn_(xid_of(cqn, "completion queue")) {
    check_aligned(m.doorbell, 8, "completion queue doorbell");
    check_aligned(m.arm_doorbell, 8, "completion queue arm doorbell");
}

// ---- the data path's CQEs -----------------------------------------------------------------------

// A CQE by its type (cq_base.cqe_type) through abi's data-path readers: REQ and RES_RC to their
// ring, TERMINAL to both, NO_OP skipped, anything else (or another queue pair's) fails the ring
// that found it: it holds a completion of a kind it does not take.
void data_path::take_send_cqes() noexcept {
    namespace fast = abi::fast;
    for (std::span<const std::byte> b = scq.next(); !b.empty(); b = scq.next()) {
        const std::byte* c = b.data();
        const std::uint8_t type = fast::cqe_type(c);
        if (type == abi::CQ_BASE_CQE_TYPE_REQ && fast::req_qp_handle(c) == qp_handle_) [[likely]] {
            sq.complete(fast::status(c), fast::sq_cons_idx(c));
        } else if (type == abi::CQ_BASE_CQE_TYPE_TERMINAL && fast::req_qp_handle(c) == qp_handle_) {
            take_terminal(c);
        } else if (type != abi::CQ_BASE_CQE_TYPE_NO_OP) {
            sq.fail(unexpected_completion());
        }
    }
    scq.done();
}

void data_path::take_receive_cqes() noexcept {
    namespace fast = abi::fast;
    for (std::span<const std::byte> b = rcq.next(); !b.empty(); b = rcq.next()) {
        const std::byte* c = b.data();
        const std::uint8_t type = fast::cqe_type(c);
        if (type == abi::CQ_BASE_CQE_TYPE_RES_RC && fast::res_qp_handle(c) == qp_handle_) [[likely]] {
            rq.complete(fast::status(c), fast::res_flags(c), fast::res_wr_id(c), fast::res_length(c), fast::res_immediate(c));
        } else if (type == abi::CQ_BASE_CQE_TYPE_TERMINAL && fast::req_qp_handle(c) == qp_handle_) {
            take_terminal(c);
        } else if (type != abi::CQ_BASE_CQE_TYPE_NO_OP) {
            rq.fail(unexpected_completion());
        }
    }
    rcq.done();
}

// TERMINAL: the send ring's entries up to its index completed, then the queue pair failed.
void data_path::take_terminal(const std::byte* c) noexcept {
    sq.terminal(abi::fast::sq_cons_idx(c), terminal_error());
    rq.fail(terminal_error());
}

// A group's CQE already matched to this queue pair by its handle (group_path::qp_of).
void data_path::take_group_cqe(const std::byte* c) noexcept {
    namespace fast = abi::fast;
    const std::uint8_t type = fast::cqe_type(c);
    if (type == abi::CQ_BASE_CQE_TYPE_REQ) [[likely]] {
        sq.complete(fast::status(c), fast::sq_cons_idx(c));
    } else if (type == abi::CQ_BASE_CQE_TYPE_RES_RC) {
        rq.complete(fast::status(c), fast::res_flags(c), fast::res_wr_id(c), fast::res_length(c), fast::res_immediate(c));
    } else if (type == abi::CQ_BASE_CQE_TYPE_TERMINAL) {
        take_terminal(c);
    }
}

}  // namespace rig::qp::bnxt
