#pragma once
// 64-byte completion entries (CQEs) of a ConnectX completion queue: rdma-core
// mlx5dv.h `struct mlx5_cqe64` and `struct mlx5_err_cqe`.
//
//   0x20 srqn_uidx     be32        0x2c byte_cnt    be32
//   0x36 vendor_err_synd u8 (error) 0x37 syndrome   u8 (error CQEs only)
//   0x38 sop_drop_qpn  be32: [31:24] opcode of the completed send entry (requester), [23:0] QPN
//   0x3c wqe_counter   be16        0x3e signature   u8
//   0x3f op_own        u8: [7:4] CQE opcode, [3:2] format, bit 1 solicited, bit 0 owner
//
// Ownership: CQE n (the unmasked consumer count) sits in slot n & (size-1) and belongs to
// software once its owner bit equals (n / size) & 1 and its opcode is not INVALID (15): the
// hardware writes owner 0 on its first pass over the ring, 1 on the second, and so on.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "abi/bits.hpp"

namespace rig::mlx5::abi {

using ::rig::abi::hex;
using ::rig::abi::load_be;
using ::rig::abi::store_be;

inline constexpr std::size_t cqe_size = 64;

// op_own >> 4 (mlx5dv.h MLX5_CQE_*)
enum class cqe_opcode : std::uint8_t {
    req = 0,            // send-side completion
    resp_wr_imm = 1,
    resp_send = 2,
    resp_send_imm = 3,
    resp_send_inv = 4,
    resize_cq = 5,
    no_packet = 6,
    sig_err = 12,
    req_err = 13,
    resp_err = 14,
    invalid = 15,       // software-initialised, never written by hardware
};

// Error syndromes (mlx5dv.h MLX5_CQE_SYNDROME_*), with "unknown" a kind of its own: a syndrome
// this table does not name is still an error, never success.
enum class cqe_error : std::uint8_t {
    none = 0,
    local_length = 0x01,
    local_qp_op = 0x02,
    local_protection = 0x04,
    flushed = 0x05,              // work request flushed in error
    mw_bind = 0x06,
    bad_response = 0x10,
    local_access = 0x11,
    remote_invalid_request = 0x12,
    remote_access = 0x13,
    remote_operation = 0x14,
    transport_retry_exceeded = 0x15,
    rnr_retry_exceeded = 0x16,
    remote_aborted = 0x22,
    unknown = 0xff,
};

std::string_view to_string(cqe_error e) noexcept;      // completion.cpp
std::string_view to_string(cqe_opcode o) noexcept;

// The opcodes mlx5dv.h names (MLX5_CQE_*): 0..6 and 12..15, as a bit mask.
inline constexpr bool cqe_opcode_known(std::uint8_t opcode) noexcept {
    return opcode < 16 && ((0xf07fu >> opcode) & 1) != 0;
}

inline constexpr cqe_error cqe_error_from_syndrome(std::uint8_t syndrome) noexcept {
    switch (syndrome) {
    case 0x01: case 0x02: case 0x04: case 0x05: case 0x06: case 0x10: case 0x11: case 0x12:
    case 0x13: case 0x14: case 0x15: case 0x16: case 0x22:
        return static_cast<cqe_error>(syndrome);
    default:
        return cqe_error::unknown;
    }
}

// Field offsets, as mlx5dv.h declares them.
namespace cqe_offset {
inline constexpr std::size_t srqn_uidx = 0x20;
inline constexpr std::size_t imm_inval_pkey = 0x24;
inline constexpr std::size_t byte_cnt = 0x2c;
inline constexpr std::size_t vendor_err_synd = 0x36;
inline constexpr std::size_t syndrome = 0x37;
inline constexpr std::size_t sop_drop_qpn = 0x38;
inline constexpr std::size_t wqe_counter = 0x3c;
inline constexpr std::size_t signature = 0x3e;
inline constexpr std::size_t op_own = 0x3f;
}  // namespace cqe_offset

// What a CQE says, decoded.
struct completion {
    cqe_opcode opcode;
    std::uint8_t format;          // 0 = no inline data (all Rig asks for)
    bool solicited;
    bool owner;
    std::uint32_t qpn;            // 24 bits
    std::uint8_t send_opcode;     // requester CQEs: opcode of the completed send entry
    std::uint16_t wqe_counter;    // requester: index of the last completed entry; responder: RQ index
    std::uint32_t byte_count;
    std::uint32_t immediate;      // imm_inval_pkey, as the wire carried it
    cqe_error error;              // none unless opcode is req_err / resp_err
    std::uint8_t syndrome;        // raw syndrome byte of an error CQE
    std::uint8_t vendor_syndrome;
};

inline std::uint8_t cqe_op_own(std::span<const std::byte, cqe_size> c) noexcept {
    return static_cast<std::uint8_t>(c[cqe_offset::op_own]);
}

// True once CQE number `count` (unmasked) of a ring of 2^log_size entries is software's.
inline bool cqe_is_software_owned(std::span<const std::byte, cqe_size> c, std::uint32_t count,
                                  std::uint32_t log_size) noexcept {
    const std::uint8_t op_own = cqe_op_own(c);
    const bool owner = (op_own & 1) != 0;
    const bool pass_parity = ((count >> log_size) & 1) != 0;
    return (op_own >> 4) != static_cast<std::uint8_t>(cqe_opcode::invalid) && owner == pass_parity;
}

// Decodes a CQE into `x`: the one CQE decoder, the data path's (qp/mlx5/completion_queue.hpp
// polls with it) as well as the tests'. Inline, no allocation, no exception: device output is not
// caller misuse, so an opcode mlx5dv.h does not name comes back as that raw opcode with error
// `unknown` and no bytes (the caller fails the queue pair it names). `x` is the caller's so each
// field is stored once where it is read: a struct built from narrow stores and copied out
// measured ~2x the poll cost (store-forwarding stalls).
inline void decode(std::span<const std::byte, cqe_size> c, completion& x) noexcept {
    const std::uint8_t op_own = cqe_op_own(c);
    const auto opcode = static_cast<std::uint8_t>(op_own >> 4);
    x.opcode = static_cast<cqe_opcode>(opcode);
    x.format = static_cast<std::uint8_t>((op_own >> 2) & 3);
    x.solicited = (op_own & 2) != 0;
    x.owner = (op_own & 1) != 0;
    const std::uint32_t sop_drop_qpn = load_be<std::uint32_t>(c.data() + cqe_offset::sop_drop_qpn);
    x.qpn = sop_drop_qpn & 0xffffff;
    x.send_opcode = static_cast<std::uint8_t>(sop_drop_qpn >> 24);
    x.wqe_counter = load_be<std::uint16_t>(c.data() + cqe_offset::wqe_counter);
    x.byte_count = load_be<std::uint32_t>(c.data() + cqe_offset::byte_cnt);
    x.immediate = load_be<std::uint32_t>(c.data() + cqe_offset::imm_inval_pkey);
    x.error = cqe_error::none;
    x.syndrome = 0;
    x.vendor_syndrome = 0;
    if (!cqe_opcode_known(opcode)) [[unlikely]] {
        x.error = cqe_error::unknown;
        x.byte_count = 0;
    } else if (x.opcode == cqe_opcode::req_err || x.opcode == cqe_opcode::resp_err) {
        // struct mlx5_err_cqe: syndrome and vendor_err_synd; byte_cnt's place says nothing
        x.syndrome = static_cast<std::uint8_t>(c[cqe_offset::syndrome]);
        x.vendor_syndrome = static_cast<std::uint8_t>(c[cqe_offset::vendor_err_synd]);
        x.error = cqe_error_from_syndrome(x.syndrome);
        x.byte_count = 0;
    }
}

inline completion decode(std::span<const std::byte, cqe_size> c) noexcept {
    completion x;
    decode(c, x);
    return x;
}

// Encodes a CQE (used by the device model). Bytes not named by `x` are written zero. Encode
// into a private block and publish it with op_own stored last: the owner bit is what makes a
// polling driver read the rest, so it must never be visible before the rest is.
void encode(std::span<std::byte, cqe_size> c, const completion& x) noexcept;
// encode()'s CQE without its last byte: bytes 0..62 written, op_own (returned) not. For a model
// that writes straight into the CQ line and stores op_own later (sim/vfio_user/polled_bytes.hpp):
// a CQE built in a private block and then copied reads that block back as wide loads over
// encode's narrow stores, which the core cannot forward from its store buffer (bench-model:
// about a tenth of the mlx5 model's time per 64 B WRITE went to that copy's stall).
std::byte encode_body(std::span<std::byte, cqe_size> c, const completion& x) noexcept;

}  // namespace rig::mlx5::abi
