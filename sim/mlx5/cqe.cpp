// Completions of the data path: the RC engine's neutral completions written as CQE64s into the
// driver's CQ buffers, and the COMP event of an armed CQ (kernel device.h
// struct mlx5_eqe, cq.h mlx5_cq_arm; rdma-core mlx5dv.h struct mlx5_cqe64 / mlx5_err_cqe,
// providers/mlx5/cq.c).
//
// CQE n (the CQ's producer count) goes to slot n & (size - 1) with owner bit (n >> log_size) & 1:
// the buffer starts software-owned with opcode INVALID, the first pass writes owner 0. The CQE is
// one DMA write whose last byte, op_own, is visible no earlier than the rest, so a polling driver
// never sees a new owner bit over old contents: the body, then op_own with the pass's other owner
// bytes, in order; on x86-64 the bodies after a pass's first CQE go as whole lines of
// non-temporal stores, op_own INVALID in them (polled_bytes.hpp stream). The consumer index in the CQ's doorbell
// record (DW0) is read when the room known from its last read runs out (the driver only moves
// it forward): a CQE that would overwrite one the driver has not consumed is an overrun, which a
// card reports as a CQ_ERROR event (syndrome 1, CQ overrun) and this model then drops the CQE.
// A CQ the driver armed (UAR + 0x20) gets one COMP EQE at its next CQE and is disarmed.
#include <array>
#include <cstdint>

// The ifc headers first: they name rig::abi as `abi`, which rig::mlx5::abi (completion.hpp)
// would hide inside rig::mlx5.
#include "abi/mlx5/ifc/eqe.hpp"
#include "sim/mlx5/function_model.hpp"
#include "abi/bits.hpp"
#include "abi/mlx5/completion.hpp"
#include "abi/mlx5/doorbell.hpp"
#include "sim/mlx5/datapath.hpp"
#include "sim/vfio_user/dma_space.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::mlx5 {

namespace {

namespace cqe_abi = rig::mlx5::abi;
namespace ifc = rig::mlx5::ifc;
using rig::abi::load_be;

constexpr std::uint32_t index_mask = 0xffffff;  // CQ counters are 24 bits (MLX5_CQ_SET_CI)
constexpr std::uint8_t cq_overrun = 0x1;        // CQ_ERROR event syndrome 1: CQ overrun (PRM)

// The mlx5 syndrome of each neutral status (mlx5dv.h MLX5_CQE_SYNDROME_*, which rdma-core maps
// back onto the same ibv_wc_status in mlx5_handle_error_cqe).
cqe_abi::cqe_error syndrome_of(roce::completion_status s) noexcept {
    using st = roce::completion_status;
    using e = cqe_abi::cqe_error;
    switch (s) {
    case st::success: return e::none;
    case st::local_length: return e::local_length;
    case st::local_qp_operation: return e::local_qp_op;
    case st::local_protection: return e::local_protection;
    case st::remote_access: return e::remote_access;
    case st::remote_invalid_request: return e::remote_invalid_request;
    case st::remote_operation: return e::remote_operation;
    case st::retry_exceeded: return e::transport_retry_exceeded;
    case st::rnr_retry_exceeded: return e::rnr_retry_exceeded;
    case st::flushed: return e::flushed;
    }
    return e::local_qp_op;
}

// A receive's CQE opcode: what consumed it (mlx5dv.h MLX5_CQE_RESP_SEND, _SEND_IMM, _WR_IMM;
// rdma-core cq.c handle_responder maps them to IBV_WC_RECV and IBV_WC_RECV_RDMA_WITH_IMM).
cqe_abi::cqe_opcode responder_opcode(const roce::completion& c) noexcept {
    if (!c.with_immediate) {
        return cqe_abi::cqe_opcode::resp_send;
    }
    return c.op == roce::work_op::write ? cqe_abi::cqe_opcode::resp_wr_imm : cqe_abi::cqe_opcode::resp_send_imm;
}

// The CQE at `line` (host address of the pinned view): its body now, op_own held with the
// pass's others. The body of a run's first CQE in place; after the first, on x86-64, the whole
// line with non-temporal stores, op_own INVALID in it until the held byte is stored
// (polled_bytes.hpp stream).
void write_cqe_line(vfio_user::polled_bytes& owners, std::byte* line, const cqe_abi::completion& x) noexcept {
    if constexpr (vfio_user::polled_bytes::streams) {
        // a line: the CQ's pages are aligned (queue_pages), and so is the host's view of them
        // unless a DMA window maps them at an odd offset, where movntdq would fault
        if (!owners.idle() && (reinterpret_cast<std::uintptr_t>(line) & (cqe_abi::cqe_size - 1)) == 0) {
            std::array<std::byte, cqe_abi::cqe_size> e{};
            const std::byte op_own = cqe_abi::encode_body(std::span<std::byte, cqe_abi::cqe_size>(e), x);
            e[cqe_abi::cqe_offset::op_own] = static_cast<std::byte>(static_cast<unsigned>(cqe_abi::cqe_opcode::invalid) << 4);
            owners.stream(line, e);
            owners.hold(line + cqe_abi::cqe_offset::op_own, op_own);
            return;
        }
    }
    const std::span<std::byte, cqe_abi::cqe_size> cqe(line, cqe_abi::cqe_size);
    const std::byte op_own = cqe_abi::encode_body(cqe, x);
    owners.hold(line + cqe_abi::cqe_offset::op_own, op_own);
}

}  // namespace

bool datapath::drain_completions(qp_slot& s, const qp_object& q) {
    bool did = false;
    roce::completion c;
    const std::uint32_t mask = static_cast<std::uint32_t>(s.opcodes.size() - 1);
    while (s.rc->take(roce::completion_side::send, c)) {
        if (s.send_cq != nullptr) {  // CREATE_QP checked the CQ, and DESTROY_CQ refuses a CQ in use
            write_cqe(*s.send_cq, c, q.qpn, s.opcodes[c.index & mask]);
        }
        did = true;
    }
    while (s.rc->take(roce::completion_side::receive, c)) {
        if (s.receive_cq != nullptr) {
            write_cqe(*s.receive_cq, c, q.qpn, 0);
        }
        did = true;
    }
    return did;
}

bool datapath::write_cqe(cq_slot& slot, const roce::completion& c, std::uint32_t qpn, std::uint8_t send_opcode) {
    cq_object& cq = *slot.cq;
    const std::uint32_t size = 1u << cq.log_cq_size;
    std::uint32_t ci = 0;
    if (slot.room == 0) {
        std::array<std::byte, 4> ci_word{};
        if (!_dma->read(cq.dbr_addr + cqe_abi::cq_dbr::set_ci, ci_word)) {
            return false;
        }
        ci = load_be<std::uint32_t>(ci_word.data()) & index_mask;
        const std::uint32_t used = (cq.producer_index - ci) & index_mask;
        slot.room = used < size ? size - used : 0;
    }
    if (slot.room == 0) {
        log().warn("mlx5 data path: CQ {:#x} overrun (producer {:#x}, consumer {:#x}): CQE of QP {:#x} dropped",
                   slot.cqn, cq.producer_index, ci, qpn);
        std::array<std::byte, ifc::cq_error::size_bytes> data{};
        abi::set<ifc::cq_error::cqn>(data, slot.cqn & index_mask);
        abi::set<ifc::cq_error::syndrome>(data, cq_overrun);
        _fn.post_event_locked(static_cast<std::uint8_t>(ifc::event_type::cq_error), 0, data);
        return false;
    }

    cqe_abi::completion x{};
    const bool ok = c.status == roce::completion_status::success;
    const bool send = c.side == roce::completion_side::send;
    x.opcode = send ? (ok ? cqe_abi::cqe_opcode::req : cqe_abi::cqe_opcode::req_err)
                    : (ok ? responder_opcode(c) : cqe_abi::cqe_opcode::resp_err);
    x.immediate = ok && !send && c.with_immediate ? c.immediate : 0;
    x.qpn = qpn;
    x.send_opcode = send ? send_opcode : 0;
    x.wqe_counter = static_cast<std::uint16_t>(c.index & 0xffff);
    x.byte_count = c.byte_len;
    x.error = syndrome_of(c.status);
    x.syndrome = static_cast<std::uint8_t>(x.error);
    x.owner = ((cq.producer_index >> cq.log_cq_size) & 1) != 0;

    // CQE n lies at n mod size in the CQ's pages; nullopt when its pages do not reach it
    const auto place_of = [&](std::uint32_t n) {
        return place_in_buffer(cq.pas, cq.log_page_size, cq.page_offset,
                               std::uint64_t{n & (size - 1)} * cqe_abi::cqe_size);
    };
    const auto place = place_of(cq.producer_index);
    if (!place) {
        return false;
    }
    // Where a run of CQEs is written with ordinary stores, the line of the CQE prefetch_ahead
    // places on is asked for now: the driver polling the CQ holds its lines, so each CQE write
    // would otherwise wait for its own cross-core transfer; a run of CQEs (one per signaled
    // entry) then waits for one transfer, not one each. A streamed CQE needs no line first.
    constexpr std::uint32_t prefetch_ahead = 16;
    if (!vfio_user::polled_bytes::streams) {
        if (const auto ahead = place_of(cq.producer_index + prefetch_ahead)) {
            _dma->prefetch(ahead->iova, true);
        }
    }
    static_assert(cqe_abi::cqe_offset::op_own == cqe_abi::cqe_size - 1, "the owner byte is the CQE's last");
    if (std::byte* line = _dma->writable(place->iova, cqe_abi::cqe_size); line != nullptr) {
        write_cqe_line(_owners, line, x);
    } else {
        std::array<std::byte, cqe_abi::cqe_size> e{};
        cqe_abi::encode(std::span<std::byte, cqe_abi::cqe_size>(e), x);
        _owners.publish();   // the CQEs before it first: CQEs become valid in order
        if (!_dma->write_last_byte_last(place->iova, e)) {
            log().warn("mlx5 data path: CQE {:#x} of CQ {:#x} at IOVA {:#x} is outside the DMA mappings",
                       cq.producer_index, slot.cqn, place->iova);
            return false;
        }
    }
    cq.producer_index = (cq.producer_index + 1) & index_mask;
    --slot.room;
    // this thread is the counter's only writer: a plain add, not a locked one per CQE
    _cqes.store(_cqes.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (slot.armed) {
        signal(slot);
    }
    return true;
}

void datapath::signal(cq_slot& slot) {
    _owners.publish();   // the event follows the CQEs it announces
    slot.armed = false;  // one event per arm (kernel cq.h mlx5_cq_arm)
    auto eq = _fn._fw.eqs().find(slot.cq->eqn);
    if (eq == _fn._fw.eqs().end()) {
        return;
    }
    std::array<std::byte, ifc::comp_event::size_bytes> data{};
    abi::set<ifc::comp_event::cq_number>(data, slot.cqn & index_mask);
    _fn.post_to_eq(eq->second, static_cast<std::uint8_t>(ifc::event_type::comp), 0, data);
}

}  // namespace rig::sim::mlx5
