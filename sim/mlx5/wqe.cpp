// Send and receive WQEs of an RC queue pair, as the card reads them (rdma-core
// mlx5dv.h struct mlx5_wqe_ctrl_seg, mlx5_wqe_raddr_seg, mlx5_wqe_data_seg,
// mlx5_wqe_inline_seg). The model parses what the driver wrote, never what it meant: a field
// the card would refuse makes the entry complete with a local QP operation error.
#include <cstring>

#include "abi/bits.hpp"
#include "abi/mlx5/entry.hpp"
#include "sim/mlx5/datapath.hpp"

namespace rig::sim::mlx5 {

namespace {

namespace wqe_abi = rig::mlx5::abi;
using rig::abi::load_be;

constexpr std::size_t segment = 16;                    // ds counts 16-byte units
constexpr std::uint32_t inline_length_mask = 0x7fffffff;  // below MLX5_INLINE_SEG
// A data segment's byte_count of 0 means 2^31 bytes to the card (entry.hpp header comment).
constexpr std::uint32_t zero_count_bytes = 0x80000000u;

std::uint32_t be32_at(std::span<const std::byte> b, std::size_t at) noexcept {
    return load_be<std::uint32_t>(b.data() + at);
}
std::uint64_t be64_at(std::span<const std::byte> b, std::size_t at) noexcept {
    return load_be<std::uint64_t>(b.data() + at);
}

}  // namespace

parsed_send parse_send_wqe(std::span<const std::byte> wqe, std::uint32_t index, std::uint32_t qpn,
                           std::uint32_t available) noexcept {
    parsed_send p;
    parse_send_wqe(wqe, index, qpn, available, p);
    return p;
}

void parse_send_wqe(std::span<const std::byte> wqe, std::uint32_t index, std::uint32_t qpn, std::uint32_t available,
                    parsed_send& p) noexcept {
    roce::send_request& r = p.request;
    // what a fresh request holds, but the scatter entries and inline bytes (see datapath.hpp)
    r.index = index;
    r.op = roce::work_op::send;
    r.sge_count = 0;
    r.is_inline = false;
    r.inline_bytes = 0;
    r.remote_va = 0;
    r.rkey = 0;
    r.with_immediate = false;
    r.immediate = 0;
    p.malformed = false;
    const std::uint32_t w0 = be32_at(wqe, 0);  // opmod_idx_opcode
    const std::uint32_t w1 = be32_at(wqe, 4);  // qpn_ds
    p.opcode = static_cast<std::uint8_t>(w0 & 0xff);
    const std::uint32_t ds = w1 & 0x3f;
    const auto fm_ce_se = static_cast<std::uint8_t>(wqe[11]);
    // CE (bits 3:2) = 2: a CQE on success too (MLX5_WQE_CTRL_CQ_UPDATE); 0: on error only.
    r.signaled = (fm_ce_se & 0x0c) == wqe_abi::ctrl_cq_update;
    p.blocks = ds == 0 ? 1 : static_cast<std::uint32_t>((ds * segment + wqe_abi::entry_size - 1) / wqe_abi::entry_size);
    // The RC engine completes a request with more scatter entries than it takes with a local QP
    // operation error and fails the queue pair: the card's answer to a malformed WQE.
    const auto malformed = [&] {
        p.malformed = true;
        r.is_inline = false;
        r.sge_count = roce::max_sge + 1;
    };
    if (p.blocks > available) {
        p.blocks = available == 0 ? 1 : available;
        malformed();
        return;
    }
    const std::size_t end = std::size_t{ds} * segment;
    if (ds == 0 || end > wqe.size() || ((w0 >> 8) & 0xffff) != (index & 0xffff) || (w1 >> 8) != qpn) {
        malformed();
        return;
    }
    std::size_t at = segment;  // after the ctrl segment
    switch (static_cast<wqe_abi::send_opcode>(p.opcode)) {
    case wqe_abi::send_opcode::rdma_write:
        r.op = roce::work_op::write;
        break;
    case wqe_abi::send_opcode::rdma_read:
        r.op = roce::work_op::read;
        break;
    case wqe_abi::send_opcode::send:
        r.op = roce::work_op::send;
        break;
    case wqe_abi::send_opcode::rdma_write_imm:
    case wqe_abi::send_opcode::send_imm:
        r.op = p.opcode == static_cast<std::uint8_t>(wqe_abi::send_opcode::send_imm) ? roce::work_op::send
                                                                                     : roce::work_op::write;
        // ctrl bytes 12..15: the immediate as the wire carries it (mlx5_wqe_ctrl_seg.imm,
        // big-endian; rdma-core's post_send copies ibv_send_wr.imm_data there unswapped)
        r.with_immediate = true;
        r.immediate = be32_at(wqe, 12);
        break;
    default:  // NOP, atomics: not run by this model
        malformed();
        return;
    }
    if (r.op != roce::work_op::send) {
        if (end < at + segment) {
            malformed();
            return;
        }
        r.remote_va = be64_at(wqe, at);      // mlx5_wqe_raddr_seg.raddr
        r.rkey = be32_at(wqe, at + 8);       // .rkey
        at += segment;
    }
    while (at < end) {
        const std::uint32_t count = be32_at(wqe, at);
        if ((count & wqe_abi::inline_seg_flag) != 0) {
            const std::uint32_t n = count & inline_length_mask;
            if (r.op == roce::work_op::read || r.sge_count != 0 || n > roce::max_inline - r.inline_bytes ||
                at + 4 + n > end) {
                malformed();
                return;
            }
            std::memcpy(r.inline_data.data() + r.inline_bytes, wqe.data() + at + 4, n);
            r.inline_bytes += n;
            r.is_inline = true;
            at += (4 + n + segment - 1) / segment * segment;
            continue;
        }
        const std::uint32_t lkey = be32_at(wqe, at + 4);
        if (r.is_inline || r.sge_count == roce::max_sge || lkey == 0) {
            malformed();
            return;
        }
        r.sg[r.sge_count++] =
            roce::sge{.va = be64_at(wqe, at + 8), .key = lkey, .length = count == 0 ? zero_count_bytes : count};
        at += segment;
    }
}

bool parse_receive_wqe(std::span<const std::byte> wqe, std::uint32_t index, roce::receive_request& out) noexcept {
    out.index = index;
    out.sge_count = 0;
    for (std::size_t at = 0; at + segment <= wqe.size(); at += segment) {
        const std::uint32_t count = be32_at(wqe, at);
        const std::uint32_t lkey = be32_at(wqe, at + 4);
        if (lkey == wqe_abi::invalid_lkey && count == 0) {
            break;  // the list ends before the slot does
        }
        if (out.sge_count == roce::max_sge || lkey == 0) {
            return false;
        }
        out.sg[out.sge_count++] =
            roce::sge{.va = be64_at(wqe, at + 8), .key = lkey, .length = count == 0 ? zero_count_bytes : count};
    }
    return true;
}

}  // namespace rig::sim::mlx5
