#pragma once
// What a peer needs to connect to a queue pair (DESIGN.md §2, seed `endpoint`): plain data that
// a program sends to the peer by any means, and its one-line text form for out-of-band exchange:
//
//   rig-endpoint qp=0x000012 psn=0xa1b2c3 gid=fe80:0000:0000:0000:0000:00ff:fe00:0001 mac=02:00:00:00:00:01
//
// The GID is written as eight groups of four hex digits (never "::"-shortened), so the text has
// one length and parses without ambiguity. parse() takes exactly what to_string() writes
// (hex digits in either case) and names what is wrong otherwise: the text comes from a peer, so
// a bad one is a refusal (an error value), not a programming error.
#include <array>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

namespace rig {

struct endpoint {
    std::uint32_t qp = 0;   // 24 bits: the queue pair's number
    std::uint32_t psn = 0;  // 24 bits: the packet sequence number its sends start at
    std::array<std::byte, 16> gid{};
    std::array<std::byte, 6> mac{};

    static constexpr std::string_view prefix = "rig-endpoint";

    std::string to_string() const;
    static std::expected<endpoint, std::string> parse(std::string_view text);

    friend bool operator==(const endpoint&, const endpoint&) = default;
};

}  // namespace rig
