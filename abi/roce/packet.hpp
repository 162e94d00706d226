#pragma once
// One RoCEv2 frame, whole: encode() lays out Ethernet, IP, UDP, BTH, the opcode's extension
// headers, payload, pad and ICRC; decode() checks and splits a frame. Both are pure (no
// allocation); the device model's wire uses them, and tests hand the bytes to tshark.
//
// Addresses are GIDs: an IPv4-mapped GID (::ffff:a.b.c.d, RoCEv2's IPv4 form, annex A17.4.5.1)
// gives an IPv4 packet, any other GID an IPv6 one.
#include <array>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <span>
#include <string_view>

#include "abi/roce/headers.hpp"

namespace rig::roce {

using mac_address = std::array<std::byte, 6>;
using gid = std::array<std::byte, 16>;

bool is_ipv4_mapped(const gid& g) noexcept;

// The transport part of a packet (BTH and extension headers), decoded.
struct transport {
    opcode op = opcode::send_only;
    bool solicited = false;
    bool ack_req = false;
    std::uint16_t pkey = default_pkey;
    std::uint32_t dest_qp = 0;  // 24 bits
    std::uint32_t psn = 0;      // 24 bits
    bool fecn = false;
    bool becn = false;
    // extension headers: used when extensions_of(op) says they are present
    std::uint64_t va = 0;         // RETH
    std::uint32_t rkey = 0;       // RETH
    std::uint32_t dma_length = 0; // RETH
    std::uint8_t syndrome = 0;    // AETH
    std::uint32_t msn = 0;        // AETH, 24 bits
    std::uint32_t immediate = 0;  // ImmDt (big-endian on the wire, host value here)
    std::uint32_t invalidate_rkey = 0;  // IETH
};

// The network part: who sends to whom.
struct route {
    mac_address src_mac{};
    mac_address dst_mac{};
    gid src_gid{};
    gid dst_gid{};
    std::uint16_t udp_src_port = 0xc000;  // entropy for ECMP; the QP's ads.udp_sport
    std::uint8_t traffic_class = 0;       // DSCP << 2 | ECN
    std::uint8_t hop_limit = 64;
    std::uint32_t flow_label = 0;         // IPv6 only, 20 bits
};

// Bytes a frame with this route, opcode and payload takes, ICRC included.
std::size_t frame_bytes(const route& r, opcode op, std::size_t payload_bytes) noexcept;

// Writes the frame into `out` and returns its length. Misuse (out too small, a field wider than
// its header field, payload on an opcode that carries none, a 16-bit length overflowing)
// throws std::invalid_argument and leaves `out` untouched.
std::size_t encode(const route& r, const transport& t, std::span<const std::byte> payload, std::span<std::byte> out);

// encode() in two steps, for a sender that places the payload itself (a NIC gathers it from
// host memory straight into the frame): encode_headers() writes everything but the payload
// bytes, i.e. headers, pad and a zero ICRC, and returns the frame's length; the payload goes at
// payload_offset(). seal() then computes and stores the ICRC over the finished frame. Misuse
// as encode's; `out` outside [payload_offset, + payload_bytes) is written, the rest untouched.
std::size_t encode_headers(const route& r, const transport& t, std::size_t payload_bytes, std::span<std::byte> out);
std::size_t payload_offset(const route& r, opcode op) noexcept;
void seal(std::span<std::byte> frame) noexcept;
// seal() for a frame whose payload is not in it but at `payload` (a sender that hands the link
// its headers and the payload where it lies, as a gather list: the model's UDP port): the ICRC
// as if `payload` were at payload_offset `payload_at`; the frame's bytes there are not read.
void seal(std::span<std::byte> frame, std::span<const std::byte> payload, std::size_t payload_at) noexcept;

// encode_headers() for a sender that sends many frames on one route (a queue pair): the
// Ethernet, IP and UDP headers, which only their length fields (and the IPv4 checksum) tell
// apart from frame to frame, are laid out once, here; each frame copies them and writes the
// lengths, the checksum (from the sum of the fixed words, RFC 1071's incremental form) and its
// BTH and extension headers. Same bytes, same misuse checks as encode_headers(r, ...) (which
// is this, made for one frame): a route that cannot be encoded is kept with refusal() saying
// why, and each encode_headers() then throws as encode_headers(r, ...) does.
class route_headers {
public:
    explicit route_headers(const route& r) noexcept;
    const route& net() const noexcept { return _route; }
    // Empty, or why no frame can take this route (GIDs mixing IPv4-mapped and IPv6, a flow
    // label over 20 bits).
    std::string_view refusal() const noexcept { return _refusal; }
    std::size_t payload_offset(opcode op) const noexcept { return _fixed + bth::size_bytes + extensions_of(op).bytes(); }
    std::size_t encode_headers(const transport& t, std::size_t payload_bytes, std::span<std::byte> out) const;

private:
    route _route;
    bool _v4 = true;
    std::size_t _fixed = 0;  // Ethernet + IP + UDP bytes
    std::array<std::byte, 14 + 40 + 8> _bytes{};  // those headers, lengths and checksum zero
    std::uint32_t _ipv4_sum = 0;  // IPv4 header words summed, total length and checksum zero
    std::string_view _refusal;
};

// Why a frame is not a RoCEv2 packet this decoder takes. A receiver drops such frames silently
// (spec 9.6: packets failing header or ICRC checks are discarded, no NAK).
enum class decode_error {
    truncated,
    not_ip,             // ethertype neither IPv4 nor IPv6
    bad_ip_header,      // version/IHL/length/checksum/fragment
    not_udp,
    not_roce_port,      // UDP destination port is not 4791
    bad_udp_length,
    bad_transport_version,
    unknown_opcode,
    bad_pad,            // pad count on a packet that carries no payload, or longer than it
    bad_icrc,
};
std::string_view to_string(decode_error e) noexcept;

struct decoded {
    route net;
    transport bth;
    std::span<const std::byte> payload;  // pad removed
};

// `icrc`: whether to check the ICRC. A receiver skips it only for a frame it knows was never
// sealed (the model's in-process wire carries unsealed frames between its own functions: the
// ICRC guards against corruption on a link, which that hand-over cannot suffer); it still
// takes the four bytes as the ICRC's place.
enum class icrc_check : bool { skip, verify };
std::expected<decoded, decode_error> decode(std::span<const std::byte> frame, icrc_check icrc = icrc_check::verify) noexcept;
// decode() into `out`, for a receiver that decodes every frame into one place: the result is
// not copied out of an std::expected (a copy that cost a 4 KiB frame's receiver as much as the
// rest of the decode). On an error `out` holds whatever was decoded before it.
std::expected<void, decode_error> decode_into(std::span<const std::byte> frame, decoded& out,
                                              icrc_check icrc = icrc_check::verify) noexcept;

// The invariant CRC of a frame whose last four bytes are the ICRC (or will be): CRC-32 (IEEE
// 802.3) over 64 one-bits standing for the absent LRH, the IP header with its variant fields
// (IPv4 TOS, TTL, checksum; IPv6 traffic class, flow label, hop limit) set to ones, the UDP
// header with its checksum set to ones, the BTH with its reserved/FECN/BECN byte set to ones,
// and everything after it up to the ICRC (annex A17.3.3; Linux rxe_icrc.c computes the same).
// Stored little-endian, as the CRC's first byte goes first on the wire.
std::uint32_t icrc(std::span<const std::byte> frame) noexcept;

}  // namespace rig::roce
