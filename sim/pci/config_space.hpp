#pragma once
// A PCI function's configuration space, family-neutral: the type 0 header (IDs, class code,
// revision, command register, BARs), a capability list built in the order the family gives,
// 4 KiB of which the extended space (0x100..) reads 0. Each family model composes one and traps
// what is its own (the mlx5 vendor-specific gateway, for instance) before handing an access on.
// PCI Local Bus 3.0 §6.1-§6.2 (header, BARs, capabilities list), §6.8.2 (MSI-X); register
// names as the kernel's include/uapi/linux/pci_regs.h. Config space is little-endian.
//
//   pci::config_space c({.vendor = 0x14e4, .device = 0x1750, .class_code = 0x020000});
//   c.set_bar(0, {.size = 64 << 10});                 // 64-bit prefetchable memory
//   c.add_msix(0x40, msix);                            // the first capability: 0x34 points at it
//   c.add_express(0x60, {.max = link, .current = link});
//   if (c.write(offset, bytes).flr) reset_function();
//
// What a driver may write (everything else keeps its value; writes vanish):
//  - Command (0x04): memory space, bus master and INTx disable (0x0406); I/O space is not
//    modelled. Status (0x06) is read-only: Capabilities List set.
//  - a BAR's address bits: a BAR of size S keeps the bits above log2(S); the low bits read 0
//    and the type bits (32/64-bit, prefetchable) read what the BAR is, so a write of all ones
//    reads back ~(S-1) | type, the size the kernel's __pci_read_base derives. The upper dword
//    of a 64-bit BAR keeps the bits above S too (all of them for S < 4 GiB). Unused BARs read 0
//    and take nothing (the kernel reads them as absent).
//  - the MSI-X capability's Message Control bits 15 (enable) and 14 (function mask); table
//    size and the BIR/offset dwords are read-only.
//  - inside the PCI Express capability: what express_cap_write keeps (express.hpp); a write
//    of Initiate FLR comes back as write_effect::flr.
//  - a vendor-specific capability's body: nothing here; the family traps its registers.
// The expansion ROM BAR, interrupt line/pin, cache line size, latency timer read 0.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "sim/pci/express.hpp"

namespace rig::sim::pci {

inline constexpr std::size_t config_bytes = 4096;  // PCI Express: 4 KiB (QEMU keeps a PCIe cap only so)
inline constexpr std::size_t bar_count = 6;        // BAR0..BAR5

// Header offsets (pci_regs.h PCI_*)
namespace cfg {
inline constexpr std::size_t vendor_id = 0x00;
inline constexpr std::size_t device_id = 0x02;
inline constexpr std::size_t command = 0x04;
inline constexpr std::size_t status = 0x06;
inline constexpr std::size_t revision = 0x08;    // then the class code, 3 bytes
inline constexpr std::size_t bar0 = 0x10;        // BAR k at 0x10 + 4k
inline constexpr std::size_t subsystem_vendor_id = 0x2c;
inline constexpr std::size_t subsystem_id = 0x2e;
inline constexpr std::size_t capability_list = 0x34;
inline constexpr std::uint16_t command_memory = 0x0002;       // PCI_COMMAND_MEMORY
inline constexpr std::uint16_t command_master = 0x0004;       // PCI_COMMAND_MASTER
inline constexpr std::uint16_t command_intx_disable = 0x0400;  // PCI_COMMAND_INTX_DISABLE
inline constexpr std::uint16_t status_cap_list = 0x0010;      // PCI_STATUS_CAP_LIST
inline constexpr std::uint32_t bar_mem_64 = 0x4;              // PCI_BASE_ADDRESS_MEM_TYPE_64
inline constexpr std::uint32_t bar_mem_prefetch = 0x8;        // PCI_BASE_ADDRESS_MEM_PREFETCH
}  // namespace cfg

// Capability IDs (pci_regs.h PCI_CAP_ID_*); PCI Express is express.hpp's cap_id_express.
inline constexpr std::uint8_t cap_id_vendor = 0x09;  // PCI_CAP_ID_VNDR
inline constexpr std::uint8_t cap_id_msix = 0x11;    // PCI_CAP_ID_MSIX
inline constexpr std::size_t msix_cap_bytes = 12;

struct identity {
    std::uint16_t vendor = 0;
    std::uint16_t device = 0;
    std::uint16_t subsystem_vendor = 0;  // 0: the vendor
    std::uint16_t subsystem = 0;
    std::uint32_t class_code = 0x020000;  // 24 bits: base, sub, interface (Ethernet controller)
    std::uint8_t revision = 0;
};

// A memory BAR.
struct bar {
    std::uint64_t size = 0;  // a power of two, at least 16 bytes (at most 2 GiB for 32-bit)
    bool is_64bit = true;    // takes the next BAR's dword for its upper half
    bool prefetchable = true;
};

// Where a function's MSI-X table and PBA lie (the capability's Table and PBA dwords).
struct msix_location {
    std::uint16_t vectors = 1;  // table size, 1..2048
    unsigned table_bar = 0;     // BIR
    std::uint64_t table_offset = 0;  // 8-byte aligned, below 4 GiB
    unsigned pba_bar = 0;
    std::uint64_t pba_offset = 0;
};

struct write_effect {
    bool flr = false;  // Initiate FLR written to a function with FLR capable
};

class config_space {
public:
    // Misuse (a bad BAR, a capability that does not fit or overlaps the header) throws
    // std::invalid_argument.
    explicit config_space(const identity& id);

    // BAR `index` (0..5): a 64-bit BAR also takes index + 1.
    void set_bar(unsigned index, const bar& b);

    // Capabilities, appended to the list in the order added: the first one is what 0x34
    // points at, each later one is linked from the one before. `at`: 4-byte aligned, 0x40..0xff.
    void add_msix(std::size_t at, const msix_location& m);
    void add_express(std::size_t at, const express_options& o);
    // A vendor-specific capability of `length` bytes (ID, next, length, then the body); the
    // family serves its body (reads and writes) itself.
    void add_vendor(std::size_t at, std::size_t length);

    // An access inside the 4 KiB (the vfio-user server checked the bounds).
    void read(std::uint64_t offset, std::span<std::byte> out) const;
    write_effect write(std::uint64_t offset, std::span<const std::byte> in);

    // What a function reset puts back: the command register (memory space and bus master off),
    // MSI-X disabled and unmasked. BAR addresses, the link and the rest stay (PCIe Base §6.6.2).
    void reset();

    // ---- state, for the family ----
    std::uint64_t bar_address(unsigned index) const;  // what the driver programmed
    bool memory_enabled() const;
    bool bus_master() const;
    bool msix_enabled() const;         // Message Control bit 15
    bool msix_function_masked() const;  // bit 14
    std::span<const std::byte, config_bytes> bytes() const { return _bytes; }

private:
    void link(std::size_t at, std::uint8_t id);
    void write_bar_byte(std::uint64_t at, std::byte value);

    std::array<std::byte, config_bytes> _bytes{};
    std::array<bar, bar_count> _bars{};
    std::array<bool, bar_count> _upper{};  // BAR k is the upper dword of BAR k-1
    std::size_t _last_cap = 0;             // 0: none yet
    std::size_t _msix = 0;                 // the MSI-X capability's offset, 0: none
    std::size_t _express = 0;
};

}  // namespace rig::sim::pci
