#pragma once
// An IPv4 UDP address as rig-nicsim's --udp takes it: "a.b.c.d:port", numbers only (no names:
// the model resolves nothing), as QEMU's -netdev socket,udp=HOST:PORT,localaddr=HOST:PORT
// names its two ends.
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

namespace rig::sim::roce {

struct udp_address {
    std::uint32_t ip = 0;    // host byte order: 127.0.0.1 is 0x7f000001
    std::uint16_t port = 0;
    bool operator==(const udp_address&) const = default;
};

// "a.b.c.d:port": four decimal numbers 0..255 and a port 1..65535 (0 too when `any_port`: bind
// where the kernel picks). Else why not, in a few words naming the text.
std::expected<udp_address, std::string> parse_udp_address(std::string_view text, bool any_port = false);
std::string to_string(const udp_address& a);

}  // namespace rig::sim::roce
