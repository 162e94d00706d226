#include "abi/roce/packet.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <string>

#include "abi/roce/crc32_fold.hpp"

namespace rig::roce {

namespace {

using abi::get;
using abi::set;

// ---- CRC-32 (IEEE 802.3, reflected polynomial 0xedb88320), sliced by eight ---------------------
// Eight tables let the loop consume eight bytes per step (Intel's "slicing-by-8"); the tables are
// built at compile time.
using crc_tables = std::array<std::array<std::uint32_t, 256>, 8>;
constexpr crc_tables make_tables() {
    crc_tables t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k) {
            c = (c & 1) != 0 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        }
        t[0][i] = c;
    }
    for (std::size_t s = 1; s < 8; ++s) {
        for (std::size_t i = 0; i < 256; ++i) {
            t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
        }
    }
    return t;
}
constexpr crc_tables tables = make_tables();

// Runs the CRC register over `b` (no initial or final inversion: the caller does those).
std::uint32_t crc_update(std::uint32_t crc, std::span<const std::byte> b) noexcept {
    const std::byte* p = b.data();
    std::size_t n = b.size();
    if (n >= 64 && crc32_fold_available()) {   // by carry-less multiplication (crc32_fold.hpp)
        const std::size_t folded = n & ~std::size_t{15};
        crc = crc32_fold(crc, p, folded);
        p += folded;
        n -= folded;
    }
    while (n >= 8) {
        const std::uint32_t lo = abi::load_le<std::uint32_t>(p) ^ crc;
        const std::uint32_t hi = abi::load_le<std::uint32_t>(p + 4);
        crc = tables[7][lo & 0xff] ^ tables[6][(lo >> 8) & 0xff] ^ tables[5][(lo >> 16) & 0xff] ^
              tables[4][lo >> 24] ^ tables[3][hi & 0xff] ^ tables[2][(hi >> 8) & 0xff] ^
              tables[1][(hi >> 16) & 0xff] ^ tables[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n-- > 0) {
        crc = tables[0][(crc ^ static_cast<std::uint8_t>(*p++)) & 0xff] ^ (crc >> 8);
    }
    return crc;
}

constexpr std::size_t eth_bytes = eth::size_bytes;

std::size_t ip_bytes(bool v4) noexcept { return v4 ? ipv4::size_bytes : ipv6::size_bytes; }

// Over the 20-byte header (IHL 5, the only one taken): a loop of constant length, unrolled.
std::uint16_t ipv4_checksum(std::span<const std::byte, ipv4::size_bytes> h) noexcept {
    std::uint32_t sum = 0;
    for (std::size_t i = 0; i < ipv4::size_bytes; i += 2) {
        sum += abi::load_be<std::uint16_t>(h.data() + i);
    }
    while ((sum >> 16) != 0) {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    return static_cast<std::uint16_t>(~sum & 0xffff);
}

std::size_t pad_of(std::size_t payload) noexcept { return (4 - payload % 4) % 4; }

[[noreturn]] void refuse(const std::string& why) { throw std::invalid_argument("roce::encode: " + why); }

}  // namespace

bool is_ipv4_mapped(const gid& g) noexcept {
    static constexpr std::array<std::uint8_t, 12> prefix{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    for (std::size_t i = 0; i < prefix.size(); ++i) {
        if (static_cast<std::uint8_t>(g[i]) != prefix[i]) {
            return false;
        }
    }
    return true;
}

std::size_t frame_bytes(const route& r, opcode op, std::size_t payload_bytes) noexcept {
    return eth_bytes + ip_bytes(is_ipv4_mapped(r.dst_gid)) + udp::size_bytes + bth::size_bytes +
           extensions_of(op).bytes() + payload_bytes + pad_of(payload_bytes) + icrc_bytes;
}

namespace {

// The ICRC of `frame`, the bytes at [payload_at, + payload.size()) read from `payload` instead
// (seal()'s second form; icrc() gives an empty payload at the ICRC's place).
std::uint32_t icrc_of(std::span<const std::byte> frame, std::span<const std::byte> payload,
                      std::size_t payload_at) noexcept {
    // The caller guarantees a well-formed frame (encode's output, or decode after its checks).
    const bool v4 = abi::load_be<std::uint16_t>(frame.data() + 12) == ethertype_ipv4;
    const std::size_t ip = ip_bytes(v4);
    const std::size_t masked_bytes = ip + udp::size_bytes + bth::size_bytes;
    std::array<std::byte, ipv6::size_bytes + udp::size_bytes + bth::size_bytes> m;
    std::memcpy(m.data(), frame.data() + eth_bytes, masked_bytes);
    std::span<std::byte> h(m.data(), masked_bytes);
    if (v4) {
        set<ipv4::tos>(h, 0xff);
        set<ipv4::ttl>(h, 0xff);
        set<ipv4::checksum>(h, 0xffff);
    } else {
        set<ipv6::traffic_class>(h, 0xff);
        set<ipv6::flow_label>(h, 0xfffff);
        set<ipv6::hop_limit>(h, 0xff);
    }
    auto u = h.subspan(ip);
    set<udp::checksum>(u, 0xffff);
    u[udp::size_bytes + bth::fecn.byte_offset()] = std::byte{0xff};  // BTH resv8a: FECN, BECN, reserved
    static constexpr std::array<std::byte, 8> lrh_ones{std::byte{0xff}, std::byte{0xff}, std::byte{0xff},
                                                       std::byte{0xff}, std::byte{0xff}, std::byte{0xff},
                                                       std::byte{0xff}, std::byte{0xff}};
    std::uint32_t crc = crc_update(0xffffffffu, lrh_ones);
    crc = crc_update(crc, h);
    const std::size_t rest_at = eth_bytes + masked_bytes;
    const std::size_t payload_end = payload_at + payload.size();
    crc = crc_update(crc, frame.subspan(rest_at, payload_at - rest_at));
    crc = crc_update(crc, payload);
    crc = crc_update(crc, frame.subspan(payload_end, frame.size() - icrc_bytes - payload_end));
    return ~crc;
}

}  // namespace

std::uint32_t icrc(std::span<const std::byte> frame) noexcept { return icrc_of(frame, {}, frame.size() - icrc_bytes); }

std::size_t payload_offset(const route& r, opcode op) noexcept {
    return eth_bytes + ip_bytes(is_ipv4_mapped(r.dst_gid)) + udp::size_bytes + bth::size_bytes + extensions_of(op).bytes();
}

void seal(std::span<std::byte> frame) noexcept {
    abi::store_le<std::uint32_t>(frame.data() + frame.size() - icrc_bytes, icrc(frame));
}

void seal(std::span<std::byte> frame, std::span<const std::byte> payload, std::size_t payload_at) noexcept {
    abi::store_le<std::uint32_t>(frame.data() + frame.size() - icrc_bytes, icrc_of(frame, payload, payload_at));
}

std::size_t encode(const route& r, const transport& t, std::span<const std::byte> payload, std::span<std::byte> out) {
    const std::size_t total = encode_headers(r, t, payload.size(), out);
    if (!payload.empty()) {
        std::memcpy(out.data() + payload_offset(r, t.op), payload.data(), payload.size());
    }
    seal(out.first(total));
    return total;
}

std::size_t encode_headers(const route& r, const transport& t, std::size_t payload_bytes, std::span<std::byte> out) {
    return route_headers(r).encode_headers(t, payload_bytes, out);
}

route_headers::route_headers(const route& r) noexcept : _route(r), _v4(is_ipv4_mapped(r.dst_gid)) {
    if (_v4 != is_ipv4_mapped(r.src_gid)) {
        _refusal = "source and destination GIDs mix IPv4-mapped and IPv6";
        return;
    }
    if (r.flow_label > 0xfffff) {
        _refusal = "flow label wider than 20 bits";
        return;
    }
    const std::size_t ip = ip_bytes(_v4);
    _fixed = eth_bytes + ip + udp::size_bytes;
    std::span<std::byte> f(_bytes.data(), _fixed);
    abi::set_bytes(f, eth::dst, r.dst_mac);
    abi::set_bytes(f, eth::src, r.src_mac);
    set<eth::ethertype>(f, _v4 ? ethertype_ipv4 : ethertype_ipv6);
    auto iph = f.subspan(eth_bytes, ip);
    if (_v4) {
        set<ipv4::version>(iph, 4);
        set<ipv4::ihl>(iph, 5);
        set<ipv4::tos>(iph, r.traffic_class);
        set<ipv4::flags_fragment>(iph, ipv4_dont_fragment);
        set<ipv4::ttl>(iph, r.hop_limit);
        set<ipv4::protocol>(iph, ip_protocol_udp);
        set<ipv4::src>(iph, abi::load_be<std::uint32_t>(r.src_gid.data() + 12));
        set<ipv4::dst>(iph, abi::load_be<std::uint32_t>(r.dst_gid.data() + 12));
        // the 16-bit words summed without folding: each frame adds its total length, then folds
        for (std::size_t i = 0; i < ip; i += 2) {
            _ipv4_sum += abi::load_be<std::uint16_t>(iph.data() + i);
        }
    } else {
        set<ipv6::version>(iph, 6);
        set<ipv6::traffic_class>(iph, r.traffic_class);
        set<ipv6::flow_label>(iph, r.flow_label);
        set<ipv6::next_header>(iph, ip_protocol_udp);
        set<ipv6::hop_limit>(iph, r.hop_limit);
        abi::set_bytes(iph, ipv6::src, r.src_gid);
        abi::set_bytes(iph, ipv6::dst, r.dst_gid);
    }
    auto uh = f.subspan(eth_bytes + ip, udp::size_bytes);
    set<udp::src_port>(uh, r.udp_src_port);
    set<udp::dst_port>(uh, udp_port);
    // checksum 0: RoCEv2 leaves the UDP checksum unused (annex A17.3.2); the ICRC covers the data
}

std::size_t route_headers::encode_headers(const transport& t, std::size_t payload_bytes, std::span<std::byte> out) const {
    if (!known(static_cast<std::uint8_t>(t.op))) {
        refuse("opcode " + abi::hex(static_cast<std::uint8_t>(t.op)) + " is not an RC opcode");
    }
    if (payload_bytes != 0 && !carries_payload(t.op)) {
        refuse(std::string(to_string(t.op)) + " carries no payload, given " + std::to_string(payload_bytes) +
               " bytes");
    }
    if (t.dest_qp > psn_mask || t.psn > psn_mask || t.msn > psn_mask) {
        refuse("dest_qp, psn and msn are 24-bit: " + abi::hex(t.dest_qp) + ", " + abi::hex(t.psn) + ", " +
               abi::hex(t.msn));
    }
    if (!_refusal.empty()) {
        if (_route.flow_label > 0xfffff) {
            refuse("flow label " + abi::hex(_route.flow_label) + " is wider than 20 bits");
        }
        refuse(std::string(_refusal));
    }
    const extension_headers x = extensions_of(t.op);
    const std::size_t headers_end = _fixed + bth::size_bytes + x.bytes();
    const std::size_t pad = pad_of(payload_bytes);
    const std::size_t total = headers_end + payload_bytes + pad + icrc_bytes;
    if (out.size() < total) {
        refuse("a " + std::to_string(total) + "-byte frame does not fit " + std::to_string(out.size()) + " bytes");
    }
    const std::size_t ip = ip_bytes(_v4);
    const std::size_t udp_len = total - eth_bytes - ip;
    if (udp_len > 0xffff) {
        refuse("UDP length " + std::to_string(udp_len) + " exceeds 65535");
    }
    // The fixed headers as laid out, then every other header byte written whole, each field's
    // word composed in a register (no read-modify-write of bytes just copied: a load that
    // straddles fresh stores waits for them), then the pad and the ICRC zeroed; the payload's
    // bytes are the caller's. Layouts: headers.hpp (spec 9.2 BTH, 9.3 extension headers).
    std::byte* f = out.data();
    std::memcpy(f, _bytes.data(), _fixed);
    std::byte* iph = f + eth_bytes;
    if (_v4) {
        const auto total_length = static_cast<std::uint32_t>(ip + udp_len);
        std::uint32_t sum = _ipv4_sum + total_length;
        while ((sum >> 16) != 0) {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        abi::store_be<std::uint16_t>(iph + ipv4::total_length.byte_offset(), static_cast<std::uint16_t>(total_length));
        abi::store_be<std::uint16_t>(iph + ipv4::checksum.byte_offset(), static_cast<std::uint16_t>(~sum & 0xffff));
    } else {
        abi::store_be<std::uint16_t>(iph + ipv6::payload_length.byte_offset(), static_cast<std::uint16_t>(udp_len));
    }
    abi::store_be<std::uint16_t>(iph + ip + udp::length.byte_offset(), static_cast<std::uint16_t>(udp_len));

    std::byte* b = f + _fixed;
    static_assert(bth::opcode.off == 0 && bth::se.off == 8 && bth::pad_count.off == 10 && bth::tver.off == 12 &&
                  bth::pkey.off == 16 && bth::fecn.off == 32 && bth::becn.off == 33 && bth::dest_qp.off == 40 &&
                  bth::ack_req.off == 64 && bth::psn.off == 72, "BTH word layout");
    abi::store_be<std::uint32_t>(b, std::uint32_t{static_cast<std::uint8_t>(t.op)} << 24 |
                                        std::uint32_t{t.solicited} << 23 | static_cast<std::uint32_t>(pad) << 20 |
                                        t.pkey);   // MigReq 0, TVer 0
    abi::store_be<std::uint32_t>(b + 4, std::uint32_t{t.fecn} << 31 | std::uint32_t{t.becn} << 30 | t.dest_qp);
    abi::store_be<std::uint32_t>(b + 8, std::uint32_t{t.ack_req} << 31 | t.psn);
    std::byte* e = b + bth::size_bytes;
    if (x.reth) {
        abi::store_be<std::uint64_t>(e, t.va);
        abi::store_be<std::uint32_t>(e + 8, t.rkey);
        abi::store_be<std::uint32_t>(e + 12, t.dma_length);
        e += reth::size_bytes;
    }
    if (x.aeth) {
        abi::store_be<std::uint32_t>(e, std::uint32_t{t.syndrome} << 24 | t.msn);
        e += aeth::size_bytes;
    }
    if (x.immdt) {
        abi::store_be<std::uint32_t>(e, t.immediate);
        e += immdt::size_bytes;
    }
    if (x.ieth) {
        abi::store_be<std::uint32_t>(e, t.invalidate_rkey);
        e += ieth::size_bytes;
    }
    // atomics' extension bytes are left zero: atomics are not generated by Rig
    std::memset(e, 0, x.atomic_bytes);
    std::memset(f + headers_end + payload_bytes, 0, pad + icrc_bytes);
    return total;
}

std::expected<decoded, decode_error> decode(std::span<const std::byte> f, icrc_check check) noexcept {
    decoded d;
    if (auto done = decode_into(f, d, check); !done) {
        return std::unexpected(done.error());
    }
    return d;
}

std::expected<void, decode_error> decode_into(std::span<const std::byte> f, decoded& d, icrc_check check) noexcept {
    using E = decode_error;
    if (f.size() < eth_bytes + ipv4::size_bytes + udp::size_bytes + bth::size_bytes + icrc_bytes) {
        return std::unexpected(E::truncated);
    }
    // what only some frames carry starts as a fresh `decoded` has it
    d.net.flow_label = 0;
    d.bth.va = 0;
    d.bth.rkey = d.bth.dma_length = 0;
    d.bth.syndrome = 0;
    d.bth.msn = d.bth.immediate = d.bth.invalidate_rkey = 0;
    std::memcpy(d.net.dst_mac.data(), f.data(), 6);
    std::memcpy(d.net.src_mac.data(), f.data() + 6, 6);
    const auto type = get<eth::ethertype>(f);
    if (type != ethertype_ipv4 && type != ethertype_ipv6) {
        return std::unexpected(E::not_ip);
    }
    const bool v4 = type == ethertype_ipv4;
    const std::size_t ip = ip_bytes(v4);
    if (f.size() < eth_bytes + ip + udp::size_bytes + bth::size_bytes + icrc_bytes) {
        return std::unexpected(E::truncated);
    }
    auto iph = f.subspan(eth_bytes, ip);
    std::size_t ip_total = 0;
    if (v4) {
        if (get<ipv4::version>(iph) != 4 || get<ipv4::ihl>(iph) != 5 || ipv4_checksum(iph.first<ipv4::size_bytes>()) != 0 ||
            (get<ipv4::flags_fragment>(iph) & 0x3fff) != 0) {
            return std::unexpected(E::bad_ip_header);
        }
        if (get<ipv4::protocol>(iph) != ip_protocol_udp) {
            return std::unexpected(E::not_udp);
        }
        ip_total = get<ipv4::total_length>(iph);
        d.net.traffic_class = static_cast<std::uint8_t>(get<ipv4::tos>(iph));
        d.net.hop_limit = static_cast<std::uint8_t>(get<ipv4::ttl>(iph));
        d.net.src_gid = gid{};
        d.net.dst_gid = gid{};
        d.net.src_gid[10] = d.net.src_gid[11] = d.net.dst_gid[10] = d.net.dst_gid[11] = std::byte{0xff};
        std::memcpy(d.net.src_gid.data() + 12, iph.data() + 12, 4);
        std::memcpy(d.net.dst_gid.data() + 12, iph.data() + 16, 4);
    } else {
        if (get<ipv6::version>(iph) != 6) {
            return std::unexpected(E::bad_ip_header);
        }
        if (get<ipv6::next_header>(iph) != ip_protocol_udp) {
            return std::unexpected(E::not_udp);
        }
        ip_total = ip + get<ipv6::payload_length>(iph);
        d.net.traffic_class = static_cast<std::uint8_t>(get<ipv6::traffic_class>(iph));
        d.net.flow_label = static_cast<std::uint32_t>(get<ipv6::flow_label>(iph));
        d.net.hop_limit = static_cast<std::uint8_t>(get<ipv6::hop_limit>(iph));
        std::memcpy(d.net.src_gid.data(), iph.data() + 8, 16);
        std::memcpy(d.net.dst_gid.data(), iph.data() + 24, 16);
    }
    // Ethernet may pad a short frame: the IP length says where the packet ends.
    if (ip_total < ip + udp::size_bytes || eth_bytes + ip_total > f.size()) {
        return std::unexpected(E::bad_ip_header);
    }
    f = f.first(eth_bytes + ip_total);
    auto uh = f.subspan(eth_bytes + ip, udp::size_bytes);
    if (get<udp::dst_port>(uh) != udp_port) {
        return std::unexpected(E::not_roce_port);
    }
    if (get<udp::length>(uh) != ip_total - ip) {
        return std::unexpected(E::bad_udp_length);
    }
    d.net.udp_src_port = static_cast<std::uint16_t>(get<udp::src_port>(uh));

    std::size_t at = eth_bytes + ip + udp::size_bytes;
    if (f.size() < at + bth::size_bytes + icrc_bytes) {
        return std::unexpected(E::truncated);
    }
    auto b = f.subspan(at, bth::size_bytes);
    if (get<bth::tver>(b) != 0) {
        return std::unexpected(E::bad_transport_version);
    }
    const auto op = static_cast<std::uint8_t>(get<bth::opcode>(b));
    if (!known(op)) {
        return std::unexpected(E::unknown_opcode);
    }
    auto& t = d.bth;
    t.op = static_cast<opcode>(op);
    t.solicited = get<bth::se>(b) != 0;
    t.pkey = static_cast<std::uint16_t>(get<bth::pkey>(b));
    t.fecn = get<bth::fecn>(b) != 0;
    t.becn = get<bth::becn>(b) != 0;
    t.dest_qp = static_cast<std::uint32_t>(get<bth::dest_qp>(b));
    t.ack_req = get<bth::ack_req>(b) != 0;
    t.psn = static_cast<std::uint32_t>(get<bth::psn>(b));
    const std::size_t pad = get<bth::pad_count>(b);
    at += bth::size_bytes;

    const extension_headers x = extensions_of(t.op);
    if (f.size() < at + x.bytes() + icrc_bytes) {
        return std::unexpected(E::truncated);
    }
    if (x.reth) {
        auto e = f.subspan(at, reth::size_bytes);
        t.va = get<reth::va>(e);
        t.rkey = static_cast<std::uint32_t>(get<reth::rkey>(e));
        t.dma_length = static_cast<std::uint32_t>(get<reth::dma_length>(e));
        at += reth::size_bytes;
    }
    if (x.aeth) {
        auto e = f.subspan(at, aeth::size_bytes);
        t.syndrome = static_cast<std::uint8_t>(get<aeth::syndrome>(e));
        t.msn = static_cast<std::uint32_t>(get<aeth::msn>(e));
        at += aeth::size_bytes;
    }
    if (x.immdt) {
        t.immediate = static_cast<std::uint32_t>(get<immdt::immediate>(f.subspan(at, immdt::size_bytes)));
        at += immdt::size_bytes;
    }
    if (x.ieth) {
        t.invalidate_rkey = static_cast<std::uint32_t>(get<ieth::rkey>(f.subspan(at, ieth::size_bytes)));
        at += ieth::size_bytes;
    }
    at += x.atomic_bytes;
    const std::size_t body = f.size() - icrc_bytes - at;
    if (pad > body || (pad != 0 && !carries_payload(t.op))) {
        return std::unexpected(E::bad_pad);
    }
    if (check == icrc_check::verify && abi::load_le<std::uint32_t>(f.data() + f.size() - icrc_bytes) != icrc(f)) {
        return std::unexpected(E::bad_icrc);
    }
    d.payload = f.subspan(at, body - pad);
    return {};
}

// ---- opcode tables (spec 9.2, tables 38 and 39) ------------------------------------------------

std::string_view to_string(opcode op) noexcept {
    switch (op) {
    case opcode::send_first: return "SEND First";
    case opcode::send_middle: return "SEND Middle";
    case opcode::send_last: return "SEND Last";
    case opcode::send_last_imm: return "SEND Last with Immediate";
    case opcode::send_only: return "SEND Only";
    case opcode::send_only_imm: return "SEND Only with Immediate";
    case opcode::write_first: return "RDMA WRITE First";
    case opcode::write_middle: return "RDMA WRITE Middle";
    case opcode::write_last: return "RDMA WRITE Last";
    case opcode::write_last_imm: return "RDMA WRITE Last with Immediate";
    case opcode::write_only: return "RDMA WRITE Only";
    case opcode::write_only_imm: return "RDMA WRITE Only with Immediate";
    case opcode::read_request: return "RDMA READ Request";
    case opcode::read_response_first: return "RDMA READ response First";
    case opcode::read_response_middle: return "RDMA READ response Middle";
    case opcode::read_response_last: return "RDMA READ response Last";
    case opcode::read_response_only: return "RDMA READ response Only";
    case opcode::acknowledge: return "Acknowledge";
    case opcode::atomic_acknowledge: return "ATOMIC Acknowledge";
    case opcode::compare_swap: return "CmpSwap";
    case opcode::fetch_add: return "FetchAdd";
    case opcode::send_last_inv: return "SEND Last with Invalidate";
    case opcode::send_only_inv: return "SEND Only with Invalidate";
    }
    return "unknown opcode";
}

std::string_view to_string(decode_error e) noexcept {
    switch (e) {
    case decode_error::truncated: return "truncated frame";
    case decode_error::not_ip: return "ethertype is neither IPv4 nor IPv6";
    case decode_error::bad_ip_header: return "malformed IP header";
    case decode_error::not_udp: return "IP protocol is not UDP";
    case decode_error::not_roce_port: return "UDP destination port is not 4791";
    case decode_error::bad_udp_length: return "UDP length disagrees with the IP length";
    case decode_error::bad_transport_version: return "BTH transport version is not 0";
    case decode_error::unknown_opcode: return "BTH opcode is not an RC opcode";
    case decode_error::bad_pad: return "BTH pad count does not fit the payload";
    case decode_error::bad_icrc: return "ICRC mismatch";
    }
    return "unknown decode error";
}

}  // namespace rig::roce
