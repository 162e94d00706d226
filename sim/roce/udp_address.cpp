#include "sim/roce/udp_address.hpp"

#include <charconv>

namespace rig::sim::roce {

namespace {

// A whole decimal number within [0, hi], no sign, no leading zeros beyond "0" itself.
bool decimal(std::string_view s, std::uint32_t hi, std::uint32_t& out) {
    if (s.empty() || s.size() > 5 || (s.size() > 1 && s[0] == '0')) {
        return false;
    }
    std::uint32_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || end != s.data() + s.size() || v > hi) {
        return false;
    }
    out = v;
    return true;
}

}  // namespace

std::expected<udp_address, std::string> parse_udp_address(std::string_view text, bool any_port) {
    const std::string quoted = "'" + std::string(text) + "'";
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
        return std::unexpected(quoted + " is not IPV4:PORT (no ':')");
    }
    udp_address a;
    std::string_view host = text.substr(0, colon);
    for (int i = 0; i < 4; ++i) {
        const std::size_t dot = i < 3 ? host.find('.') : host.size();
        std::uint32_t byte = 0;
        if (dot == std::string_view::npos || !decimal(host.substr(0, dot), 255, byte)) {
            return std::unexpected(quoted + ": '" + std::string(text.substr(0, colon)) +
                                   "' is not an IPv4 address in numbers (a.b.c.d)");
        }
        a.ip = a.ip << 8 | byte;
        host = dot < host.size() ? host.substr(dot + 1) : std::string_view{};
    }
    std::uint32_t port = 0;
    if (!decimal(text.substr(colon + 1), 65535, port) || (port == 0 && !any_port)) {
        return std::unexpected(quoted + ": '" + std::string(text.substr(colon + 1)) + "' is not a port (1..65535)");
    }
    a.port = static_cast<std::uint16_t>(port);
    return a;
}

std::string to_string(const udp_address& a) {
    return std::to_string(a.ip >> 24) + "." + std::to_string((a.ip >> 16) & 255) + "." +
           std::to_string((a.ip >> 8) & 255) + "." + std::to_string(a.ip & 255) + ":" + std::to_string(a.port);
}

}  // namespace rig::sim::roce
