#pragma once
/// @file
/// What a peer needs to connect to a queue pair (docs/guide.md, "Queue pairs"): plain data that
/// a program sends to the peer by any means, and its one-line text form for out-of-band exchange:
///
/// @code
///   rig-endpoint qp=0x000012 psn=0xa1b2c3 gid=fe80:0000:0000:0000:0000:00ff:fe00:0001 mac=02:00:00:00:00:01
/// @endcode
///
/// The GID is written as eight groups of four hex digits (never "::"-shortened), so the text has
/// one length and parses without ambiguity. parse() takes exactly what to_string() writes
/// (hex digits in either case) and names what is wrong otherwise: the text comes from a peer, so
/// a bad one is a refusal (an error value), not a programming error.
#include "rig/config.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

namespace rig {

/// What a peer needs to connect to a queue pair (queue_pair::local, queue_pair::connect).
struct RIG_API endpoint {
    std::uint32_t qp = 0;   ///< 24 bits: the queue pair's number
    std::uint32_t psn = 0;  ///< 24 bits: the packet sequence number its sends start at
    std::array<std::byte, 16> gid{};  ///< the GID its NIC's packets carry (GID table entry 0)
    std::array<std::byte, 6> mac{};   ///< its NIC's MAC address

    /// The first word of the text form.
    static constexpr std::string_view prefix = "rig-endpoint";

    /// The one-line text form (above).
    std::string to_string() const;
    /// The endpoint `text` names (what to_string() writes), or what is wrong with it.
    static std::expected<endpoint, std::string> parse(std::string_view text);

    friend bool operator==(const endpoint&, const endpoint&) = default;
};

}  // namespace rig
