#include "driver/function.hpp"

#include <sys/mman.h>

#include <array>

namespace rig::driver {

std::string_view to_string(caching c) noexcept {
    switch (c) {
    case caching::uncached: return "uncached";
    case caching::write_combining: return "write-combining";
    case caching::write_back: return "write-back";
    }
    return "unknown";
}

result<std::uint16_t> function::config_read16(std::uint32_t offset) {
    std::array<std::byte, 2> b{};
    if (auto r = config_read(offset, b); !r) {
        return std::unexpected(r.error());
    }
    // PCI configuration space is little-endian
    return static_cast<std::uint16_t>(std::to_integer<unsigned>(b[0]) |
                                      (std::to_integer<unsigned>(b[1]) << 8));
}

result<std::uint32_t> function::config_read32(std::uint32_t offset) {
    std::array<std::byte, 4> b{};
    if (auto r = config_read(offset, b); !r) {
        return std::unexpected(r.error());
    }
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) {
        v = (v << 8) | std::to_integer<std::uint32_t>(b[static_cast<std::size_t>(i)]);
    }
    return v;
}

result<void> function::config_write16(std::uint32_t offset, std::uint16_t value) {
    const std::array<std::byte, 2> b{static_cast<std::byte>(value & 0xff),
                                     static_cast<std::byte>(value >> 8)};
    return config_write(offset, b);
}

result<void> function::set_bus_master(bool on) {
    constexpr std::uint32_t command = 0x04;
    constexpr std::uint16_t bus_master = 1u << 2;
    auto cmd = config_read16(command);
    if (!cmd) {
        return std::unexpected(cmd.error());
    }
    const auto v = static_cast<std::uint16_t>(on ? (*cmd | bus_master) : (*cmd & ~bus_master));
    return config_write16(command, v);
}

void map_placeholder(void* base, std::size_t length) noexcept {
    // MAP_NORESERVE: the pages cost nothing until a stray store touches them
    if (::mmap(base, length, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) ==
        MAP_FAILED) {
        ::munmap(base, length);   // no memory left: then at least the device's pages go
    }
}

}  // namespace rig::driver
