#pragma once
// RoCEv2 on the wire: Ethernet, IPv4 or IPv6, UDP to port 4791, then the InfiniBand transport
// headers: BTH, and after it RETH, AETH, ImmDt or IETH as the opcode says, the payload padded to
// four bytes, and the 4-byte invariant CRC (IBTA spec vol. 1 ch. 9 "Transport layer", annex
// A17 "RoCEv2"). Every header is big-endian with fields named by bit offset from the MSB of its
// first byte — the same convention as mlx5's PRM layouts (abi/bits.hpp), so the same set/get
// accessors serve. Field names follow the spec; test/unit/roce checks them against Wireshark's
// dissector (tshark) and the ICRC against an independent implementation of Linux rxe's.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "abi/bits.hpp"

// A header: size in bytes, each field {bit offset, width}.
#define RIG_ROCE_FIELD_DECL(name, off, bits) static constexpr ::rig::abi::field name{off, bits};
#define RIG_ROCE_FIELD_ROW(name, off, bits) ::rig::abi::named_field{#name, {off, bits}, {}},
#define RIG_ROCE_HEADER(type, bytes, LIST)                                                    \
    struct type {                                                                           \
        static constexpr std::string_view name = #type;                                     \
        static constexpr std::size_t size_bytes = bytes;                                    \
        LIST(RIG_ROCE_FIELD_DECL)                                                           \
        static constexpr ::rig::abi::named_field fields[] = {LIST(RIG_ROCE_FIELD_ROW)};     \
    };                                                                                      \
    static_assert(::rig::abi::well_formed(type::fields, (bytes) * 8),                       \
                  #type ": a field is misshapen, outside the header, or overlaps another");

namespace rig::roce {

inline constexpr std::uint16_t udp_port = 4791;           // IANA "roce" (annex A17.2.1)
inline constexpr std::uint16_t ethertype_ipv4 = 0x0800;
inline constexpr std::uint16_t ethertype_ipv6 = 0x86dd;
inline constexpr std::uint8_t ip_protocol_udp = 17;
inline constexpr std::size_t icrc_bytes = 4;
inline constexpr std::uint16_t default_pkey = 0xffff;    // the full-member default partition

#define RIG_ROCE_ETH(F)      \
    F(dst, 0, 48)            \
    F(src, 48, 48)           \
    F(ethertype, 96, 16)
RIG_ROCE_HEADER(eth, 14, RIG_ROCE_ETH)

#define RIG_ROCE_IPV4(F)          \
    F(version, 0, 4)              \
    F(ihl, 4, 4)                  \
    F(tos, 8, 8)                  \
    F(total_length, 16, 16)       \
    F(identification, 32, 16)     \
    F(flags_fragment, 48, 16)     \
    F(ttl, 64, 8)                 \
    F(protocol, 72, 8)            \
    F(checksum, 80, 16)           \
    F(src, 96, 32)                \
    F(dst, 128, 32)
RIG_ROCE_HEADER(ipv4, 20, RIG_ROCE_IPV4)
inline constexpr std::uint16_t ipv4_dont_fragment = 0x4000;

#define RIG_ROCE_IPV6(F)          \
    F(version, 0, 4)              \
    F(traffic_class, 4, 8)        \
    F(flow_label, 12, 20)         \
    F(payload_length, 32, 16)     \
    F(next_header, 48, 8)         \
    F(hop_limit, 56, 8)           \
    F(src, 64, 128)               \
    F(dst, 192, 128)
RIG_ROCE_HEADER(ipv6, 40, RIG_ROCE_IPV6)

#define RIG_ROCE_UDP(F)      \
    F(src_port, 0, 16)       \
    F(dst_port, 16, 16)      \
    F(length, 32, 16)        \
    F(checksum, 48, 16)
RIG_ROCE_HEADER(udp, 8, RIG_ROCE_UDP)

// Base Transport Header (spec 9.2). `becn`/`fecn` are RoCEv2's congestion bits in the first
// reserved byte (annex A17.9.3); the ICRC treats that whole byte as variant.
#define RIG_ROCE_BTH(F)      \
    F(opcode, 0, 8)          \
    F(se, 8, 1)              \
    F(migreq, 9, 1)          \
    F(pad_count, 10, 2)      \
    F(tver, 12, 4)           \
    F(pkey, 16, 16)          \
    F(fecn, 32, 1)           \
    F(becn, 33, 1)           \
    F(dest_qp, 40, 24)       \
    F(ack_req, 64, 1)        \
    F(psn, 72, 24)
RIG_ROCE_HEADER(bth, 12, RIG_ROCE_BTH)

// RDMA Extended Transport Header (9.3.3): WRITE FIRST/ONLY and READ REQUEST.
#define RIG_ROCE_RETH(F)     \
    F(va, 0, 64)             \
    F(rkey, 64, 32)          \
    F(dma_length, 96, 32)
RIG_ROCE_HEADER(reth, 16, RIG_ROCE_RETH)

// ACK Extended Transport Header (9.3.5): ACKNOWLEDGE and READ RESPONSE FIRST/LAST/ONLY.
#define RIG_ROCE_AETH(F)     \
    F(syndrome, 0, 8)        \
    F(msn, 8, 24)
RIG_ROCE_HEADER(aeth, 4, RIG_ROCE_AETH)

// Immediate data (9.3.7) and the invalidate header (9.3.9): 32 bits each.
#define RIG_ROCE_IMMDT(F) F(immediate, 0, 32)
RIG_ROCE_HEADER(immdt, 4, RIG_ROCE_IMMDT)
#define RIG_ROCE_IETH(F) F(rkey, 0, 32)
RIG_ROCE_HEADER(ieth, 4, RIG_ROCE_IETH)

// RC opcodes (BTH opcode, transport bits 7:5 = 000; spec table 38).
enum class opcode : std::uint8_t {
    send_first = 0x00,
    send_middle = 0x01,
    send_last = 0x02,
    send_last_imm = 0x03,
    send_only = 0x04,
    send_only_imm = 0x05,
    write_first = 0x06,
    write_middle = 0x07,
    write_last = 0x08,
    write_last_imm = 0x09,
    write_only = 0x0a,
    write_only_imm = 0x0b,
    read_request = 0x0c,
    read_response_first = 0x0d,
    read_response_middle = 0x0e,
    read_response_last = 0x0f,
    read_response_only = 0x10,
    acknowledge = 0x11,
    atomic_acknowledge = 0x12,
    compare_swap = 0x13,
    fetch_add = 0x14,
    send_last_inv = 0x16,
    send_only_inv = 0x17,
};
std::string_view to_string(opcode op) noexcept;  // "RDMA WRITE Only", as the spec names it

// Which extension headers follow the BTH (spec table 39), in wire order.
struct extension_headers {
    bool reth = false;
    bool aeth = false;
    bool immdt = false;
    bool ieth = false;
    std::size_t atomic_bytes = 0;  // AtomicETH (28) or AtomicAckETH (8): decoded as opaque bytes
    constexpr std::size_t bytes() const noexcept {
        return (reth ? reth::size_bytes : 0) + (aeth ? aeth::size_bytes : 0) + (immdt ? immdt::size_bytes : 0) +
               (ieth ? ieth::size_bytes : 0) + atomic_bytes;
    }
};
// Inline (spec 9.2, tables 38 and 39): every frame the model sends or receives asks them.
// False for an opcode RC does not define (0x15, 0x18 and up).
constexpr bool known(std::uint8_t op) noexcept { return op <= 0x17 && op != 0x15; }
constexpr extension_headers extensions_of(opcode op) noexcept {
    extension_headers x;
    switch (op) {
    case opcode::write_first:
    case opcode::write_only:
    case opcode::read_request: x.reth = true; break;
    case opcode::write_only_imm: x.reth = x.immdt = true; break;
    case opcode::send_last_imm:
    case opcode::send_only_imm:
    case opcode::write_last_imm: x.immdt = true; break;
    case opcode::read_response_first:
    case opcode::read_response_last:
    case opcode::read_response_only:
    case opcode::acknowledge: x.aeth = true; break;
    case opcode::atomic_acknowledge: x.aeth = true; x.atomic_bytes = 8; break;
    case opcode::compare_swap:
    case opcode::fetch_add: x.atomic_bytes = 28; break;
    case opcode::send_last_inv:
    case opcode::send_only_inv: x.ieth = true; break;
    default: break;
    }
    return x;
}
// Whether a packet of this opcode may carry payload.
constexpr bool carries_payload(opcode op) noexcept {
    switch (op) {
    case opcode::read_request:
    case opcode::acknowledge:
    case opcode::atomic_acknowledge:
    case opcode::compare_swap:
    case opcode::fetch_add: return false;
    default: return true;
    }
}

// AETH syndrome (spec 9.7.5.2.1, table 41): bits 6:5 the kind, bits 4:0 its value.
enum class ack_kind : std::uint8_t { ack = 0, rnr_nak = 1, reserved = 2, nak = 3 };
enum class nak_code : std::uint8_t {
    psn_sequence_error = 0,
    invalid_request = 1,
    remote_access_error = 2,
    remote_operational_error = 3,
    invalid_rd_request = 4,
};
inline constexpr std::uint8_t credits_invalid = 0x1f;  // ACK: "no end-to-end credits" (RoCE uses none)

constexpr std::uint8_t syndrome(ack_kind kind, std::uint8_t value) noexcept {
    return static_cast<std::uint8_t>(static_cast<std::uint8_t>(kind) << 5 | (value & 0x1f));
}
constexpr ack_kind kind_of(std::uint8_t syndrome) noexcept { return static_cast<ack_kind>((syndrome >> 5) & 3); }
constexpr std::uint8_t value_of(std::uint8_t syndrome) noexcept { return syndrome & 0x1f; }

// PSNs are 24-bit and compared in a window of 2^23 (spec 9.7.1).
inline constexpr std::uint32_t psn_mask = 0xffffff;
constexpr std::uint32_t psn_add(std::uint32_t psn, std::uint32_t n) noexcept { return (psn + n) & psn_mask; }
// a - b as a signed distance in the 24-bit circle: > 0 when a is after b.
constexpr std::int32_t psn_diff(std::uint32_t a, std::uint32_t b) noexcept {
    return static_cast<std::int32_t>(((a - b) & psn_mask) << 8) >> 8;
}

}  // namespace rig::roce
