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

std::byte encode_body(std::span<std::byte, cqe_size> c, const completion& x) noexcept {
    static_assert(cqe_offset::op_own == cqe_size - 1, "op_own is the CQE's last byte");
    std::memset(c.data(), 0, cqe_offset::op_own);
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
    return static_cast<std::byte>((static_cast<std::uint8_t>(x.opcode) << 4) | ((x.format & 3) << 2) |
                                  (x.solicited ? 2 : 0) | (x.owner ? 1 : 0));
}

void encode(std::span<std::byte, cqe_size> c, const completion& x) noexcept {
    c[cqe_offset::op_own] = encode_body(c, x);
}

}  // namespace rig::mlx5::abi
