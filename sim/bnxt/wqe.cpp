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
constexpr std::size_t static_wqe_bytes = abi::static_wqe_slots * slot_bytes;   // what a pass fetches

// The fields are read in place (abi::load with the descriptors the driver's writer uses), not
// through decode<>: decode builds the whole structure field by field on the stack and copies it
// out, and those wide loads over its narrow stores stall on store forwarding (bench-model bnxt:
// a fifth of the model core per 64 B WRITE went to this parse).
template <class T>
[[gnu::always_inline]] inline T field(const std::byte* at, const abi::field_desc& d) noexcept {
    return static_cast<T>(abi::load(at, d));
}

// The header's first bytes, common to every SQ WQE type.
struct base_fields {
    std::uint8_t type, flags, slots;
    std::uint32_t length;
};

base_fields base_of(std::span<const std::byte, static_wqe_bytes> wqe) noexcept {
    const std::byte* h = wqe.data();
    return {field<std::uint8_t>(h, abi::fast::wqe_type_f), field<std::uint8_t>(h, abi::fast::wqe_flags_f),
            field<std::uint8_t>(h, abi::fast::wqe_size_f), field<std::uint32_t>(h, abi::fast::wqe_length_f)};
}

// The inline bytes after the header; false when the entry cannot carry them.
bool take_inline(std::span<const std::byte, static_wqe_bytes> wqe, const base_fields& b,
                 roce::send_request& r) noexcept {
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
bool take_sges(std::span<const std::byte, static_wqe_bytes> wqe, const base_fields& b, roce::send_request& r) noexcept {
    const std::size_t n = b.slots - 2u;
    if (n > abi::static_max_sge) {
        return false;
    }
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const std::byte* g = wqe.data() + header_bytes + i * slot_bytes;
        const auto key = field<std::uint32_t>(g, abi::fast::sge_key_f);
        const auto size = field<std::uint32_t>(g, abi::fast::sge_size_f);
        if (key == 0) {
            return false;
        }
        r.sg[i] = roce::sge{.va = field<std::uint64_t>(g, abi::fast::sge_va_f), .key = key, .length = size};
        total += size;
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

void parse_send_wqe(std::span<const std::byte> bytes, std::uint32_t index, bool signal_all, parsed_send& p) noexcept {
    if (bytes.size() < static_wqe_bytes) {
        return malformed_send(index, p);
    }
    const auto wqe = bytes.first<static_wqe_bytes>();
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
        r.immediate = field<std::uint32_t>(wqe.data(), abi::fast::wqe_imm_f);
        break;
    default:   // invalidates, atomics, memory windows: not run by this model
        return malformed_send(index, p);
    }
    if (b.slots < 2 || b.slots > abi::static_wqe_slots) {
        return malformed_send(index, p);
    }
    if (r.op != roce::work_op::send) {
        r.remote_va = field<std::uint64_t>(wqe.data(), abi::fast::wqe_va_f);
        r.rkey = field<std::uint32_t>(wqe.data(), abi::fast::wqe_key_f);
    }
    const bool ok = (b.flags & abi::SQ_SEND_HDR_FLAGS_INLINE) != 0 ? take_inline(wqe, b, r) : take_sges(wqe, b, r);
    if (!ok) {
        malformed_send(index, p);
    }
}

bool parse_receive_wqe(std::span<const std::byte> wqe, std::uint32_t max_sge, std::uint32_t index,
                       roce::receive_request& out, std::uint32_t& wr_id) noexcept {
    out.index = index;
    out.sge_count = 0;
    if (wqe.size() < header_bytes) {
        return false;
    }
    const std::byte* h = wqe.data();
    const auto type = field<std::uint8_t>(h, abi::fast::rq_type_f);
    const auto slots = field<std::uint8_t>(h, abi::fast::rq_size_f);
    wr_id = field<std::uint32_t>(h, abi::fast::rq_id_f);
    const std::size_t n = slots < 2 ? 0 : slots - 2u;
    if (type != abi::RQ_WQE_HDR_WQE_TYPE_RCV || slots < 2 || n > max_sge || n > abi::static_max_sge ||
        header_bytes + n * slot_bytes > wqe.size()) {
        return false;
    }
    for (std::size_t i = 0; i < n; ++i) {
        const std::byte* g = h + header_bytes + i * slot_bytes;
        const auto size = field<std::uint32_t>(g, abi::fast::sge_size_f);
        const auto key = field<std::uint32_t>(g, abi::fast::sge_key_f);
        if (size == 0) {
            continue;   // an empty element (a zero-SGE receive posts one: rdma-core bnxt_re_post_recv)
        }
        if (key == 0) {
            return false;
        }
        out.sg[out.sge_count++] =
            roce::sge{.va = field<std::uint64_t>(g, abi::fast::sge_va_f), .key = key, .length = size};
    }
    return true;
}

}  // namespace rig::sim::bnxt
