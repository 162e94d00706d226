// A PCI function's configuration space (config_space.hpp; PCI Local Bus 3.0 §6.1, §6.2.5 BARs,
// §6.7 capabilities, §6.8.2 MSI-X).
#include "sim/pci/config_space.hpp"

#include <bit>
#include <cstring>
#include <stdexcept>
#include <string>

namespace rig::sim::pci {

namespace {

void put16(std::byte* p, std::uint16_t v) {
    p[0] = static_cast<std::byte>(v & 0xff);
    p[1] = static_cast<std::byte>(v >> 8);
}
void put32(std::byte* p, std::uint32_t v) {
    put16(p, static_cast<std::uint16_t>(v & 0xffff));
    put16(p + 2, static_cast<std::uint16_t>(v >> 16));
}
std::uint32_t get32(const std::byte* p) {
    return std::to_integer<std::uint32_t>(p[0]) | std::to_integer<std::uint32_t>(p[1]) << 8 |
           std::to_integer<std::uint32_t>(p[2]) << 16 | std::to_integer<std::uint32_t>(p[3]) << 24;
}

constexpr std::uint16_t command_writable = cfg::command_memory | cfg::command_master | cfg::command_intx_disable;
constexpr std::size_t msix_control = 2;                 // in the capability: table size - 1 (10:0), mask, enable
constexpr std::uint8_t msix_control_high_writable = 0xc0;  // enable (15) and function mask (14)
constexpr std::size_t caps_begin = 0x40;                // after the type 0 header
constexpr std::size_t caps_end = 0x100;                 // the legacy space; 0x100.. is extended

std::size_t bar_at(unsigned index) { return cfg::bar0 + 4 * std::size_t{index}; }

}  // namespace

config_space::config_space(const identity& id) {
    put16(&_bytes[cfg::vendor_id], id.vendor);
    put16(&_bytes[cfg::device_id], id.device);
    put32(&_bytes[cfg::revision], (id.class_code & 0xffffffu) << 8 | id.revision);
    put16(&_bytes[cfg::subsystem_vendor_id], id.subsystem_vendor != 0 ? id.subsystem_vendor : id.vendor);
    put16(&_bytes[cfg::subsystem_id], id.subsystem);
}

void config_space::set_bar(unsigned index, const bar& b) {
    const unsigned span = b.is_64bit ? 2 : 1;
    if (index + span > bar_count || !std::has_single_bit(b.size) || b.size < 16 ||
        (!b.is_64bit && b.size > (std::uint64_t{1} << 31))) {
        throw std::invalid_argument("pci config space: BAR" + std::to_string(index) +
                                    " must be a power of two of at least 16 bytes, fit BAR0..5 and, 32-bit, 2 GiB");
    }
    for (unsigned k = index; k < index + span; ++k) {
        if (_bars[k].size != 0 || _upper[k]) {
            throw std::invalid_argument("pci config space: BAR" + std::to_string(k) + " is taken already");
        }
    }
    _bars[index] = b;
    const std::uint32_t type = (b.is_64bit ? cfg::bar_mem_64 : 0u) | (b.prefetchable ? cfg::bar_mem_prefetch : 0u);
    put32(&_bytes[bar_at(index)], type);
    if (b.is_64bit) {
        _upper[index + 1] = true;
        put32(&_bytes[bar_at(index + 1)], 0);
    }
}

// Appends a capability of `id` at `at` to the list: 0x34 names the first, the one before
// names this one; this one is the last (next 0) until another comes.
void config_space::link(std::size_t at, std::uint8_t id) {
    if (at % 4 != 0 || at < caps_begin || at >= caps_end || (_last_cap != 0 && at <= _last_cap)) {
        throw std::invalid_argument("pci config space: a capability must be 4-byte aligned in 0x40..0xff, after the "
                                    "one before");
    }
    _bytes[cfg::status] |= std::byte{cfg::status_cap_list};  // the low byte holds Capabilities List
    _bytes[_last_cap == 0 ? cfg::capability_list : _last_cap + 1] = static_cast<std::byte>(at);
    _bytes[at] = static_cast<std::byte>(id);
    _bytes[at + 1] = std::byte{0};
    _last_cap = at;
}

void config_space::add_msix(std::size_t at, const msix_location& m) {
    if (at + msix_cap_bytes > caps_end || m.vectors == 0 || m.vectors > 2048 || m.table_bar >= bar_count ||
        m.pba_bar >= bar_count || m.table_offset % 8 != 0 || m.pba_offset % 8 != 0 || m.table_offset >> 32 != 0 ||
        m.pba_offset >> 32 != 0 || _msix != 0) {
        throw std::invalid_argument("pci config space: one MSI-X capability of 1..2048 vectors, table and PBA in "
                                    "BAR0..5 at 8-byte aligned offsets below 4 GiB");
    }
    link(at, cap_id_msix);
    put16(&_bytes[at + msix_control], static_cast<std::uint16_t>(m.vectors - 1));
    put32(&_bytes[at + 4], static_cast<std::uint32_t>(m.table_offset) | m.table_bar);
    put32(&_bytes[at + 8], static_cast<std::uint32_t>(m.pba_offset) | m.pba_bar);
    _msix = at;
}

void config_space::add_express(std::size_t at, const express_options& o) {
    if (at + express_cap_bytes > caps_end || _express != 0) {
        throw std::invalid_argument("pci config space: one PCI Express capability, within 0x40..0xff");
    }
    link(at, cap_id_express);
    put_express_cap(_bytes, at, 0, o);
    _express = at;
}

void config_space::add_vendor(std::size_t at, std::size_t length) {
    if (length < 3 || length > 0xff || at + length > caps_end) {
        throw std::invalid_argument("pci config space: a vendor-specific capability of 3..255 bytes within 0x40..0xff");
    }
    link(at, cap_id_vendor);
    _bytes[at + 2] = static_cast<std::byte>(length);  // its length (PCI 3.0 §6.7)
}

void config_space::read(std::uint64_t offset, std::span<std::byte> out) const {
    std::memcpy(out.data(), _bytes.data() + offset, out.size());
}

write_effect config_space::write(std::uint64_t offset, std::span<const std::byte> in) {
    write_effect e;
    for (std::size_t i = 0; i < in.size(); ++i) {
        const std::uint64_t at = offset + i;
        if (at == cfg::command || at == cfg::command + 1) {
            const auto mask = static_cast<std::uint8_t>(command_writable >> (8 * (at - cfg::command)));
            _bytes[at] = in[i] & std::byte{mask};
        } else if (at >= cfg::bar0 && at < bar_at(bar_count)) {
            write_bar_byte(at, in[i]);
        } else if (_msix != 0 && at == _msix + msix_control + 1) {
            // MSI-X enable and function mask; the table size bits are read-only
            _bytes[at] = (_bytes[at] & std::byte{0x3f}) | (in[i] & std::byte{msix_control_high_writable});
        } else if (_express != 0 && at >= _express && at < _express + express_cap_bytes) {
            e.flr = express_cap_write(_bytes, _express, at, in[i]) == express_effect::flr || e.flr;
        }
    }
    return e;
}

// A BAR byte keeps the address bits the BAR's size leaves (all ones written reads back the
// size, §6.2.5.1); its low dword's type bits read what the BAR is.
void config_space::write_bar_byte(std::uint64_t at, std::byte value) {
    const auto k = static_cast<unsigned>((at - cfg::bar0) / 4);
    const unsigned byte = static_cast<unsigned>((at - cfg::bar0) % 4);
    const unsigned owner = _upper[k] ? k - 1 : k;
    const bar& b = _bars[owner];
    if (b.size == 0) {
        return;  // unused: reads 0
    }
    const std::uint64_t address_mask = ~(b.size - 1) & ~std::uint64_t{0xf};
    const std::uint32_t dword_mask = _upper[k] ? static_cast<std::uint32_t>(address_mask >> 32)
                                               : static_cast<std::uint32_t>(address_mask);
    const auto mask = std::byte{static_cast<std::uint8_t>(dword_mask >> (8 * byte))};
    const std::byte type = _upper[k] ? std::byte{0} : _bytes[at] & ~mask;
    _bytes[at] = (value & mask) | type;
}

void config_space::reset() {
    _bytes[cfg::command] = std::byte{0};
    _bytes[cfg::command + 1] = std::byte{0};
    if (_msix != 0) {
        _bytes[_msix + msix_control + 1] &= std::byte{0x3f};  // MSI-X disabled, unmasked
    }
}

std::uint64_t config_space::bar_address(unsigned index) const {
    if (index >= bar_count || _upper[index] || _bars[index].size == 0) {
        return 0;
    }
    std::uint64_t a = get32(&_bytes[bar_at(index)]) & ~std::uint64_t{0xf};
    if (_bars[index].is_64bit) {
        a |= std::uint64_t{get32(&_bytes[bar_at(index + 1)])} << 32;
    }
    return a;
}

bool config_space::memory_enabled() const {
    return (std::to_integer<unsigned>(_bytes[cfg::command]) & cfg::command_memory) != 0;
}
bool config_space::bus_master() const {
    return (std::to_integer<unsigned>(_bytes[cfg::command]) & cfg::command_master) != 0;
}
bool config_space::msix_enabled() const {
    return _msix != 0 && (std::to_integer<unsigned>(_bytes[_msix + msix_control + 1]) & 0x80) != 0;
}
bool config_space::msix_function_masked() const {
    return _msix != 0 && (std::to_integer<unsigned>(_bytes[_msix + msix_control + 1]) & 0x40) != 0;
}

}  // namespace rig::sim::pci
