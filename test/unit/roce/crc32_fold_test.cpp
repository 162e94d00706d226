// abi/roce/crc32_fold: the CRC by carry-less multiplication gives the byte-wise table's register
// for every length it takes (64 and up, multiples of 16), alignment and starting register; and
// the ICRC of frames long enough to take it matches the one computed byte by byte.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "abi/roce/crc32_fold.hpp"
#include "abi/roce/packet.hpp"

namespace {

std::uint32_t bytewise(std::uint32_t crc, const std::byte* p, std::size_t n) {
    while (n-- > 0) {
        crc ^= std::to_integer<std::uint32_t>(*p++);
        for (int k = 0; k < 8; ++k) {
            crc = (crc & 1) != 0 ? 0xedb88320u ^ (crc >> 1) : crc >> 1;
        }
    }
    return crc;
}

}  // namespace

TEST_CASE("crc32_fold runs the CRC register as the byte-wise CRC-32 does", "[roce][crc]") {
    if (!rig::roce::crc32_fold_available()) {
        SUCCEED("no PCLMULQDQ on this CPU: the table path alone runs");
        return;
    }
    std::mt19937 random(16);
    std::vector<std::byte> data(9000 + 16);
    for (std::byte& b : data) {
        b = std::byte(static_cast<std::uint8_t>(random()));
    }
    for (std::size_t n = 64; n <= 9000; n += 16) {
        const std::size_t at = random() % 16;
        const std::uint32_t start = n % 3 == 0 ? 0xffffffffu : static_cast<std::uint32_t>(random());
        INFO("n " << n << " at " << at);
        REQUIRE(rig::roce::crc32_fold(start, data.data() + at, n) == bytewise(start, data.data() + at, n));
    }
}

TEST_CASE("the ICRC of a long frame, folded, is the byte-wise one (CRC-32 over the masked frame)", "[roce][crc]") {
    rig::roce::route r;
    r.src_mac = {std::byte{2}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{1}};
    r.dst_mac = {std::byte{2}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{2}};
    r.src_gid[0] = r.dst_gid[0] = std::byte{0xfe};
    r.src_gid[1] = r.dst_gid[1] = std::byte{0x80};
    r.src_gid[15] = std::byte{1};
    r.dst_gid[15] = std::byte{2};
    rig::roce::transport t;
    t.op = rig::roce::opcode::send_only;
    for (std::size_t n : {0u, 1u, 17u, 64u, 255u, 1024u, 4093u, 4096u}) {
        std::vector<std::byte> payload(n, std::byte{0x5a});
        std::vector<std::byte> frame(rig::roce::frame_bytes(r, t.op, n));
        frame.resize(rig::roce::encode(r, t, payload, frame));
        // the ICRC's masked copy (annex A17.3.3: 8 one-bytes for the LRH, IPv6 traffic class, flow
        // label and hop limit, UDP checksum and the BTH's reserved byte all ones), byte by byte
        std::vector<std::byte> masked(8 + frame.size() - 14 - 4, std::byte{0xff});
        std::copy(frame.begin() + 14, frame.end() - 4, masked.begin() + 8);
        masked[8 + 0] |= std::byte{0x0f};   // version stays, traffic class and flow label all ones
        for (std::size_t i = 1; i < 4; ++i) {
            masked[8 + i] = std::byte{0xff};
        }
        masked[8 + 7] = std::byte{0xff};                 // hop limit
        masked[8 + 40 + 6] = masked[8 + 40 + 7] = std::byte{0xff};   // UDP checksum
        masked[8 + 48 + 4] = std::byte{0xff};            // BTH reserved byte (FECN, BECN)
        const std::uint32_t want = ~bytewise(0xffffffffu, masked.data(), masked.size());
        INFO("payload " << n);
        CHECK(rig::roce::icrc(frame) == want);
    }
}

TEST_CASE("seal with the payload elsewhere gives the ICRC of the whole frame", "[roce][crc]") {
    rig::roce::route r;
    r.src_gid[0] = r.dst_gid[0] = std::byte{0xfe};
    r.dst_gid[15] = std::byte{2};
    rig::roce::transport t;
    t.op = rig::roce::opcode::write_only;
    for (std::size_t n : {1u, 3u, 64u, 1000u, 4096u}) {
        std::vector<std::byte> payload(n);
        for (std::size_t i = 0; i < n; ++i) {
            payload[i] = std::byte(static_cast<std::uint8_t>(i * 13 + n));
        }
        std::vector<std::byte> whole(rig::roce::frame_bytes(r, t.op, n));
        whole.resize(rig::roce::encode(r, t, payload, whole));
        std::vector<std::byte> headers(whole.size());
        headers.resize(rig::roce::encode_headers(r, t, n, headers));   // no payload in it
        rig::roce::seal(headers, payload, rig::roce::payload_offset(r, t.op));
        INFO("payload " << n);
        CHECK(std::equal(headers.end() - 4, headers.end(), whole.end() - 4));
    }
}
