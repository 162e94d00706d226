// Construction checks and completion handling of the mlx5 send, receive and completion queues,
// and the failures the NIC reports by event.
#include "qp/mlx5/data_path.hpp"  // first: see its comment

#include <bit>
#include <string>

#include "qp/mlx5/bfreg.hpp"
#include "qp/mlx5/completion_queue.hpp"
#include "qp/mlx5/receive_queue.hpp"
#include "qp/mlx5/send_queue.hpp"

namespace rig::qp::mlx5 {

namespace {

[[noreturn]] void refuse(const std::string& what) { throw std::invalid_argument(what); }

// Number of `unit`-byte slots in `ring`, checked: a power of two in 1..max_slots.
std::uint32_t slots_of(std::span<std::byte> ring, std::size_t unit, std::size_t max_slots,
                       const char* what) {
    const std::size_t n = ring.size() / unit;
    if (ring.size() % unit != 0 || n == 0 || n > max_slots || !std::has_single_bit(n)) {
        refuse(std::string(what) + ": " + std::to_string(ring.size()) + " bytes is not 2^n (1.." +
               std::to_string(max_slots) + ") slots of " + std::to_string(unit) + " bytes");
    }
    check_aligned(ring.data(), unit < 64 ? unit : 64, what);
    return static_cast<std::uint32_t>(n);
}

std::byte* record_of(std::span<std::byte> record, const char* what) {
    if (record.size() < abi::qp_dbr::size) {
        refuse(std::string(what) + ": doorbell record of " + std::to_string(record.size()) +
               " bytes, 8 needed");
    }
    check_aligned(record.data(), 8, what);
    return record.data();
}

// The entry a 16-bit wqe_counter names (rdma-core providers/mlx5/cq.c), or nothing.
std::optional<std::uint64_t> named_entry(const qp::ring& r, std::uint16_t counter) {
    return r.resolve(counter, 16);
}

// A mlx5 queue's ring holds at most 2^15 entries (log_max_qp_sz), so a 16-bit counter names
// exactly one outstanding entry.
constexpr std::size_t max_queue_slots = std::size_t{1} << 15;

}  // namespace

// ---- BlueFlame register ------------------------------------------------------------------

bfreg::bfreg(std::byte* reg, std::size_t half, copy_rule rule) : reg_(reg), half_(half), rule_(rule) {
    check_aligned(reg, 8, "BlueFlame register");
    if (half == 0 || half % 8 != 0) {
        refuse("BlueFlame register: half of " + std::to_string(half) + " bytes (a multiple of 8 needed)");
    }
    if (rule != copy_rule::never && half < abi::bf_copy_block) {
        refuse("BlueFlame register: half of " + std::to_string(half) + " bytes holds no " +
               std::to_string(abi::bf_copy_block) + "-byte copy");
    }
}

void bfreg::ring_shared(const std::byte* entry, bool copy) noexcept {
    lock();
    ring_alone(entry, copy);
    unlock();
}

// ---- send queue ---------------------------------------------------------------------------

send_queue::send_queue(send_queue_memory m, std::uint32_t qpn)
    : ring_(m.ring),
      mask_(slots_of(m.ring, abi::entry_size, max_queue_slots, "send queue ring") - 1),
      record_(record_of(m.doorbell_record, "send queue") + abi::qp_dbr::send_counter),
      bf_(m.doorbell),
      qpn_(qpn),
      entries_(static_cast<std::uint32_t>(mask_ + 1), static_cast<std::uint32_t>(mask_ + 1)) {
    if (m.doorbell == nullptr) {
        refuse("send queue: no BlueFlame register");
    }
    if (qpn > static_cast<std::uint32_t>(abi::max_qp)) {
        refuse("send queue: qpn " + ::rig::abi::hex(qpn) + " over 24 bits");
    }
}

void send_queue::complete(const abi::completion& c) noexcept {
    if (entries_.failed()) {
        return;   // flush completions after the failure change no result
    }
    const auto n = named_entry(entries_, c.wqe_counter);
    if (!is_send_side(c.opcode) || !n) [[unlikely]] {
        entries_.fail(unexpected_completion());
        return;
    }
    if (c.opcode == abi::cqe_opcode::req) {
        entries_.complete_through(*n, std::nullopt);   // a send's result is its posted length
    } else if (c.error == abi::cqe_error::flushed) {
        entries_.fail_flushed_at(*n, flushed_error_of(c));  // the queue pair failed, not this entry
    } else {
        entries_.fail_at(*n, error_of(c));
    }
}

// ---- receive queue ------------------------------------------------------------------------

receive_queue::receive_queue(receive_queue_memory m)
    : ring_(m.ring),
      stride_(m.stride),
      mask_(0),
      record_(record_of(m.doorbell_record, "receive queue") + abi::qp_dbr::receive_counter),
      entries_(1, 1) {
    if (m.stride < abi::scatter_size || !std::has_single_bit(m.stride)) {
        refuse("receive queue: stride " + std::to_string(m.stride) + " is not 2^n >= 16");
    }
    const std::uint32_t n = slots_of(m.ring, m.stride, max_queue_slots, "receive queue ring");
    mask_ = n - 1;
    entries_ = qp::ring(n, n);
}

void receive_queue::complete(const abi::completion& c) noexcept {
    if (entries_.failed()) {
        return;
    }
    const auto n = named_entry(entries_, c.wqe_counter);
    const bool ours = c.opcode == abi::cqe_opcode::resp_send || c.opcode == abi::cqe_opcode::resp_err ||
                      c.opcode == abi::cqe_opcode::resp_send_imm || c.opcode == abi::cqe_opcode::resp_wr_imm;
    if (!ours || !n) [[unlikely]] {
        entries_.fail(unexpected_completion());
        return;
    }
    if (c.opcode == abi::cqe_opcode::resp_send) [[likely]] {
        entries_.complete_through(*n, c.byte_count);
    } else if (c.opcode != abi::cqe_opcode::resp_err) {
        // with immediate (imm_inval_pkey; rdma-core cq.c handle_responder): RESP_WR_IMM's
        // byte_cnt is the WRITE's length, its bytes at the WRITE's target
        entries_.note_immediate(*n, c.immediate, c.opcode == abi::cqe_opcode::resp_wr_imm ? rig::operation::write_imm
                                                                                            : rig::operation::receive);
        entries_.complete_through(*n, c.byte_count);
    } else if (c.error == abi::cqe_error::flushed) {
        entries_.fail_flushed_at(*n, flushed_error_of(c));
    } else {
        entries_.fail_at(*n, error_of(c));
    }
}

// ---- completion queue ---------------------------------------------------------------------

completion_queue::completion_queue(completion_queue_memory m, std::uint32_t cqn)
    : ring_(m.ring),
      mask_(slots_of(m.ring, abi::cqe_size, std::size_t{1} << 24, "completion queue ring") - 1),
      log_size_(static_cast<std::uint32_t>(std::countr_zero(mask_ + 1))),
      record_(record_of(m.doorbell_record, "completion queue")),
      uar_(m.uar_page),
      cqn_(cqn) {
    check_aligned(m.uar_page, 8, "completion queue UAR page");
    if (cqn > 0xffffffu) {
        refuse("completion queue: cqn " + ::rig::abi::hex(cqn) + " over 24 bits");
    }
}

// ---- failures reported by event -------------------------------------------------------------

bool is_failure_event(std::uint8_t event_type) noexcept {
    using t = ::rig::mlx5::ifc::event_type;
    const auto type = static_cast<t>(event_type);
    return type == t::wq_catas_error || type == t::wq_inval_req_error || type == t::wq_access_error ||
           type == t::path_mig_failed;
}

entry_error reported_failure(std::uint8_t event_type) noexcept {
    using t = ::rig::mlx5::ifc::event_type;
    switch (static_cast<t>(event_type)) {
    case t::wq_catas_error: return {"the NIC reported the queue pair's failure: WQ_CATAS_ERROR", event_type, 0, true};
    case t::wq_inval_req_error:
        return {"the NIC reported the queue pair's failure: WQ_INVAL_REQ_ERROR", event_type, 0, true};
    case t::wq_access_error:
        return {"the NIC reported the queue pair's failure: WQ_ACCESS_ERROR", event_type, 0, true};
    default: return {"the NIC reported the queue pair's failure: PATH_MIG_FAILED", event_type, 0, true};
    }
}

}  // namespace rig::qp::mlx5
