// The PCI Express capability of an endpoint (express.hpp; PCIe Base 5.0 §7.5.3).
#include "sim/pci/express.hpp"

namespace rig::sim::pci {

namespace {

void put16(std::span<std::byte> c, std::size_t at, std::uint16_t v) {
    c[at] = static_cast<std::byte>(v & 0xff);
    c[at + 1] = static_cast<std::byte>(v >> 8);
}
void put32(std::span<std::byte> c, std::size_t at, std::uint32_t v) {
    put16(c, at, static_cast<std::uint16_t>(v & 0xffff));
    put16(c, at + 2, static_cast<std::uint16_t>(v >> 16));
}

constexpr std::uint16_t version_2 = 0x2;         // PCI_EXP_FLAGS_VERS: the v2 register set (to 0x3c)
constexpr std::uint16_t type_endpoint = 0x0 << 4;  // PCI_EXP_TYPE_ENDPOINT
constexpr std::uint32_t devcap_extended_tag = 0x20;  // PCI_EXP_DEVCAP_EXT_TAG
// Role-Based Error Reporting: every device of PCIe 1.1 or later sets it (§7.5.3.3); the kernel
// takes a device without it for a pre-1.1 one and turns ASPM off (drivers/pci/pcie/aspm.c
// pcie_aspm_sanity_check: "disabling ASPM on pre-1.1 PCIe device").
constexpr std::uint32_t devcap_rber = 0x8000;  // PCI_EXP_DEVCAP_RBER
// the bits a driver may write, per register (the rest read-only)
constexpr std::uint16_t devctl_writable = 0x7fff;  // all but Initiate FLR, which reads 0
constexpr std::uint16_t lnkctl_writable = 0x00c3;  // ASPM control, common clock, extended sync
constexpr std::uint16_t devctl2_writable = 0x001f;  // completion timeout value and disable
constexpr std::uint32_t devcap2_timeout_ranges = 0xf;  // ranges A-D supported
constexpr std::uint32_t devcap2_timeout_disable = 0x10;

std::uint32_t speeds_vector(link_speed max) {
    // LNKCAP2 Supported Link Speeds, bits 7:1: every speed up to the maximum (§7.5.3.18)
    std::uint32_t v = 0;
    for (unsigned s = 1; s <= static_cast<unsigned>(max); ++s) {
        v |= 1u << s;
    }
    return v;
}

std::uint16_t link_word(link l) {
    return static_cast<std::uint16_t>(static_cast<unsigned>(l.speed) | (unsigned{l.width} & 0x3f) << 4);
}

}  // namespace

void put_express_cap(std::span<std::byte> config, std::size_t at, std::uint8_t next, const express_options& o) {
    for (std::size_t i = 0; i < express_cap_bytes; ++i) {
        config[at + i] = std::byte{0};
    }
    config[at] = std::byte{cap_id_express};
    config[at + 1] = std::byte{next};
    put16(config, at + express::flags, version_2 | type_endpoint);
    put32(config, at + express::devcap,
          (o.max_payload & 0x7u) | devcap_extended_tag | devcap_rber | (o.flr ? express::devcap_flr : 0u));
    put16(config, at + express::devctl, 0x2810);  // reset values: relaxed ordering, no snoop, 512 B reads
    put32(config, at + express::lnkcap, link_word(o.max));  // port number 0, no ASPM
    put16(config, at + express::lnksta, link_word(o.current));
    put32(config, at + express::devcap2, devcap2_timeout_ranges | devcap2_timeout_disable);
    put32(config, at + express::lnkcap2, speeds_vector(o.max.speed));
    put16(config, at + express::lnkctl2, static_cast<std::uint16_t>(o.max.speed));  // target link speed
}

express_effect express_cap_write(std::span<std::byte> config, std::size_t at, std::size_t offset, std::byte value) {
    const std::size_t r = offset - at;
    const auto take = [&](std::size_t reg, std::uint16_t writable) {
        const unsigned shift = 8 * static_cast<unsigned>(r - reg);
        const auto mask = std::byte{static_cast<std::uint8_t>(writable >> shift)};
        config[offset] = (config[offset] & ~mask) | (value & mask);
    };
    if (r == express::devctl || r == express::devctl + 1) {
        take(express::devctl, devctl_writable);
        const bool flr_capable = (std::to_integer<unsigned>(config[at + express::devcap + 3]) & 0x10) != 0;
        if (r == express::devctl + 1 && (std::to_integer<unsigned>(value) & 0x80) != 0 && flr_capable) {
            return express_effect::flr;
        }
    } else if (r == express::lnkctl || r == express::lnkctl + 1) {
        take(express::lnkctl, lnkctl_writable);
    } else if (r == express::devctl2 || r == express::devctl2 + 1) {
        take(express::devctl2, devctl2_writable);
    }
    return express_effect::none;
}

}  // namespace rig::sim::pci
