#include "abi/mlx5/completion.hpp"

#include <cstring>

namespace rig::mlx5::abi {

std::string_view to_string(cqe_error e) noexcept {
    switch (e) {
    case cqe_error::none: return "success";
    case cqe_error::local_length: return "local length error";
    case cqe_error::local_qp_op: return "local QP operation error";
    case cqe_error::local_protection: return "local protection error";
    case cqe_error::flushed: return "work request flushed in error";
    case cqe_error::mw_bind: return "memory window bind error";
    case cqe_error::bad_response: return "bad response error";
    case cqe_error::local_access: return "local access error";
    case cqe_error::remote_invalid_request: return "remote invalid request error";
    case cqe_error::remote_access: return "remote access error";
    case cqe_error::remote_operation: return "remote operation error";
    case cqe_error::transport_retry_exceeded: return "transport retry counter exceeded";
    case cqe_error::rnr_retry_exceeded: return "RNR retry counter exceeded";
    case cqe_error::remote_aborted: return "remote aborted error";
    case cqe_error::unknown: return "unknown error syndrome";
    }
    return "unknown error syndrome";
}

std::string_view to_string(cqe_opcode o) noexcept {
    switch (o) {
    case cqe_opcode::req: return "REQ";
    case cqe_opcode::resp_wr_imm: return "RESP_WR_IMM";
    case cqe_opcode::resp_send: return "RESP_SEND";
    case cqe_opcode::resp_send_imm: return "RESP_SEND_IMM";
    case cqe_opcode::resp_send_inv: return "RESP_SEND_INV";
    case cqe_opcode::resize_cq: return "RESIZE_CQ";
    case cqe_opcode::no_packet: return "NO_PACKET";
    case cqe_opcode::sig_err: return "SIG_ERR";
    case cqe_opcode::req_err: return "REQ_ERR";
    case cqe_opcode::resp_err: return "RESP_ERR";
    case cqe_opcode::invalid: return "INVALID";
    }
    return "unknown";
}

cqe_error cqe_error_from_syndrome(std::uint8_t syndrome) noexcept {
    switch (syndrome) {
    case 0x01: case 0x02: case 0x04: case 0x05: case 0x06: case 0x10: case 0x11: case 0x12:
    case 0x13: case 0x14: case 0x15: case 0x16: case 0x22:
        return static_cast<cqe_error>(syndrome);
    default:
        return cqe_error::unknown;
    }
}

namespace {
bool known_opcode(std::uint8_t op) {
    switch (op) {
    case 0: case 1: case 2: case 3: case 4: case 5: case 6: case 12: case 13: case 14: case 15:
        return true;
    default:
        return false;
    }
}
}  // namespace

std::expected<completion, std::string> decode(std::span<const std::byte, cqe_size> c) {
    const std::uint8_t op_own = cqe_op_own(c);
    const std::uint8_t opcode = op_own >> 4;
    if (!known_opcode(opcode)) {
        return std::unexpected("mlx5 CQE: unknown opcode " + std::to_string(opcode) + " (op_own " +
                               hex(op_own) + ")");
    }
    completion x{};
    x.opcode = static_cast<cqe_opcode>(opcode);
    x.format = (op_own >> 2) & 3;
    x.solicited = (op_own & 2) != 0;
    x.owner = (op_own & 1) != 0;
    const std::uint32_t sop_drop_qpn = load_be<std::uint32_t>(c.data() + cqe_offset::sop_drop_qpn);
    x.qpn = sop_drop_qpn & 0xffffff;
    x.send_opcode = static_cast<std::uint8_t>(sop_drop_qpn >> 24);
    x.wqe_counter = load_be<std::uint16_t>(c.data() + cqe_offset::wqe_counter);
    x.byte_count = load_be<std::uint32_t>(c.data() + cqe_offset::byte_cnt);
    x.immediate = load_be<std::uint32_t>(c.data() + cqe_offset::imm_inval_pkey);
    x.error = cqe_error::none;
    if (x.opcode == cqe_opcode::req_err || x.opcode == cqe_opcode::resp_err) {
        x.syndrome = static_cast<std::uint8_t>(c[cqe_offset::syndrome]);
        x.vendor_syndrome = static_cast<std::uint8_t>(c[cqe_offset::vendor_err_synd]);
        x.error = cqe_error_from_syndrome(x.syndrome);
        // an error CQE reuses byte_cnt's place for nothing useful: report no bytes moved
        x.byte_count = 0;
    }
    return x;
}

void encode(std::span<std::byte, cqe_size> c, const completion& x) noexcept {
    std::memset(c.data(), 0, cqe_size);
    store_be<std::uint32_t>(c.data() + cqe_offset::imm_inval_pkey, x.immediate);
    const bool is_error = x.opcode == cqe_opcode::req_err || x.opcode == cqe_opcode::resp_err;
    if (is_error) {
        c[cqe_offset::syndrome] = static_cast<std::byte>(x.syndrome);
        c[cqe_offset::vendor_err_synd] = static_cast<std::byte>(x.vendor_syndrome);
    } else {
        store_be<std::uint32_t>(c.data() + cqe_offset::byte_cnt, x.byte_count);
    }
    store_be<std::uint32_t>(c.data() + cqe_offset::sop_drop_qpn,
                            (std::uint32_t{x.send_opcode} << 24) | (x.qpn & 0xffffff));
    store_be<std::uint16_t>(c.data() + cqe_offset::wqe_counter, x.wqe_counter);
    c[cqe_offset::op_own] = static_cast<std::byte>(
        (static_cast<std::uint8_t>(x.opcode) << 4) | ((x.format & 3) << 2) |
        (x.solicited ? 2 : 0) | (x.owner ? 1 : 0));
}

}  // namespace rig::mlx5::abi
