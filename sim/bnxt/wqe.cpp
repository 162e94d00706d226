// Send and receive WQEs of a bnxt RC queue pair in static mode, as the card reads them
// (roce_hsi.h sq_send_hdr, sq_rdma_hdr, sq_sge, rq_wqe_hdr;
// qplib_fp.c bnxt_qplib_post_send, bnxt_qplib_post_recv). The model parses what the driver
// wrote, never what it meant: a field the card would refuse makes the entry complete with
// LOCAL_QP_OPERATION_ERR and fails the queue pair (the RC engine's answer to a request with
// more scatter entries than it takes).
#include <cstring>

#include "abi/bnxt/wqe.hpp"
#include "sim/bnxt/datapath.hpp"

namespace rig::sim::bnxt {

namespace {

namespace abi = ::rig::bnxt::abi;

constexpr std::size_t header_bytes = abi::sq_send_hdr::layout_size;   // 2 slots
constexpr std::size_t slot_bytes = abi::wqe_slot_size;

// The header's first bytes, common to every SQ WQE type.
struct base_fields {
    std::uint8_t type, flags, slots;
    std::uint32_t length;
};

base_fields base_of(std::span<const std::byte> wqe) noexcept {
    const auto h = *abi::decode<abi::sq_send_hdr>(wqe);
    return {h.wqe_type, h.flags, h.wqe_size, h.length};
}

// The inline bytes after the header; false when the entry cannot carry them.
bool take_inline(std::span<const std::byte> wqe, const base_fields& b, roce::send_request& r) noexcept {
    const std::size_t slots = (std::size_t{b.length} + slot_bytes - 1) / slot_bytes;
    if (r.op == roce::work_op::read || b.length > abi::static_max_inline || b.slots != 2 + slots) {
        return false;
    }
    std::memcpy(r.inline_data.data(), wqe.data() + header_bytes, b.length);
    r.inline_bytes = b.length;
    r.is_inline = true;
    return true;
}

// The SGEs after the header; false when they are not what the header says.
bool take_sges(std::span<const std::byte> wqe, const base_fields& b, roce::send_request& r) noexcept {
    const std::size_t n = b.slots - 2u;
    if (n > abi::static_max_sge) {
        return false;
    }
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const auto g = *abi::decode<abi::sq_sge>(wqe.subspan(header_bytes + i * slot_bytes));
        if (g.l_key == 0) {
            return false;
        }
        r.sg[i] = roce::sge{.va = g.va_or_pa, .key = g.l_key, .length = g.size};
        total += g.size;
    }
    r.sge_count = static_cast<std::uint8_t>(n);
    return total == b.length;
}

}  // namespace

void malformed_send(std::uint32_t index, parsed_send& p) noexcept {
    roce::send_request& r = p.request;
    r.index = index;
    r.op = roce::work_op::send;
    r.signaled = true;
    r.is_inline = false;
    r.inline_bytes = 0;
    r.sge_count = roce::max_sge + 1;   // the engine completes it LOCAL_QP_OPERATION and fails the QP
    p.malformed = true;
}

void parse_send_wqe(std::span<const std::byte> wqe, std::uint32_t index, bool signal_all, parsed_send& p) noexcept {
    roce::send_request& r = p.request;
    const base_fields b = base_of(wqe);
    // what a fresh request holds, but the scatter entries and inline bytes (datapath.hpp)
    r.index = index;
    r.sge_count = 0;
    r.is_inline = false;
    r.inline_bytes = 0;
    r.remote_va = 0;
    r.rkey = 0;
    r.with_immediate = false;
    r.immediate = 0;
    r.signaled = signal_all || (b.flags & abi::SQ_SEND_HDR_FLAGS_SIGNAL_COMP) != 0;
    p.malformed = false;
    switch (b.type) {
    case abi::SQ_BASE_WQE_TYPE_SEND: r.op = roce::work_op::send; break;
    case abi::SQ_BASE_WQE_TYPE_WRITE_WQE: r.op = roce::work_op::write; break;
    case abi::SQ_BASE_WQE_TYPE_READ_WQE: r.op = roce::work_op::read; break;
    case abi::SQ_BASE_WQE_TYPE_SEND_W_IMMEAD:
    case abi::SQ_BASE_WQE_TYPE_WRITE_W_IMMEAD:
        // The header's immediate field (sq_send_hdr.inv_key_or_imm_data, sq_rdma_hdr.imm_data:
        // one place) holds the value little-endian; the card sends it big-endian (rdma-core
        // bnxt_re_post_send: key_immd = htole32(be32toh(imm_data))).
        r.op = b.type == abi::SQ_BASE_WQE_TYPE_SEND_W_IMMEAD ? roce::work_op::send : roce::work_op::write;
        r.with_immediate = true;
        r.immediate = abi::decode<abi::sq_rdma_hdr>(wqe)->imm_data;
        break;
    default:   // invalidates, atomics, memory windows: not run by this model
        return malformed_send(index, p);
    }
    if (b.slots < 2 || b.slots > abi::static_wqe_slots) {
        return malformed_send(index, p);
    }
    if (r.op != roce::work_op::send) {
        const auto h = *abi::decode<abi::sq_rdma_hdr>(wqe);
        r.remote_va = h.remote_va;
        r.rkey = h.remote_key;
    }
    const bool ok = (b.flags & abi::SQ_SEND_HDR_FLAGS_INLINE) != 0 ? take_inline(wqe, b, r) : take_sges(wqe, b, r);
    if (!ok) {
        malformed_send(index, p);
    }
}

bool parse_receive_wqe(std::span<const std::byte> wqe, std::uint32_t max_sge, std::uint32_t index,
                       roce::receive_request& out, std::uint32_t& wr_id) noexcept {
    const auto h = *abi::decode<abi::rq_wqe_hdr>(wqe);
    out.index = index;
    out.sge_count = 0;
    wr_id = h.wr_id;
    const std::size_t n = h.wqe_size < 2 ? 0 : h.wqe_size - 2u;
    if (h.wqe_type != abi::RQ_WQE_HDR_WQE_TYPE_RCV || h.wqe_size < 2 || n > max_sge || n > abi::static_max_sge ||
        header_bytes + n * slot_bytes > wqe.size()) {
        return false;
    }
    for (std::size_t i = 0; i < n; ++i) {
        const auto g = *abi::decode<abi::sq_sge>(wqe.subspan(header_bytes + i * slot_bytes));
        if (g.size == 0) {
            continue;   // an empty element (a zero-SGE receive posts one: rdma-core bnxt_re_post_recv)
        }
        if (g.l_key == 0) {
            return false;
        }
        out.sg[out.sge_count++] = roce::sge{.va = g.va_or_pa, .key = g.l_key, .length = g.size};
    }
    return true;
}

}  // namespace rig::sim::bnxt
