#pragma once
// The PCI Express capability (ID 0x10) of an endpoint function, family-neutral: what a device
// model puts in its configuration space so that a driver finds the link it sits on and a reset
// method (PCI Express Base Specification 5.0 §7.5.3; register and bit names as the kernel's
// include/uapi/linux/pci_regs.h PCI_EXP_*). Config space is little-endian.
//
//   pci::express_options o{.link = {pci::link_speed::gt16, 16}};
//   pci::put_express_cap(config, 0x60, next, o);
//   if (pci::express_cap_write(config, 0x60, offset, byte) == pci::express_effect::flr) reset();
//
// Writable: Device Control (but Initiate FLR, which reads 0: it starts a Function Level Reset
// when the function advertises FLR in Device Capabilities, §7.5.3.4), Link Control's ASPM and
// clock bits, Device Control 2's completion-timeout bits. Everything else is read-only.
#include <cstddef>
#include <cstdint>
#include <span>

namespace rig::sim::pci {

inline constexpr std::uint8_t cap_id_express = 0x10;  // PCI_CAP_ID_EXP
inline constexpr std::size_t express_cap_bytes = 0x3c;  // through Link Status 2 (PCI_CAP_EXP_ENDPOINT_SIZEOF_V2)

// Register offsets inside the capability (pci_regs.h PCI_EXP_*)
namespace express {
inline constexpr std::size_t flags = 0x02;     // PCI_EXP_FLAGS: version 3:0, device/port type 7:4
inline constexpr std::size_t devcap = 0x04;    // PCI_EXP_DEVCAP
inline constexpr std::size_t devctl = 0x08;    // PCI_EXP_DEVCTL
inline constexpr std::size_t devsta = 0x0a;    // PCI_EXP_DEVSTA
inline constexpr std::size_t lnkcap = 0x0c;    // PCI_EXP_LNKCAP
inline constexpr std::size_t lnkctl = 0x10;    // PCI_EXP_LNKCTL
inline constexpr std::size_t lnksta = 0x12;    // PCI_EXP_LNKSTA
inline constexpr std::size_t devcap2 = 0x24;   // PCI_EXP_DEVCAP2
inline constexpr std::size_t devctl2 = 0x28;   // PCI_EXP_DEVCTL2
inline constexpr std::size_t lnkcap2 = 0x2c;   // PCI_EXP_LNKCAP2
inline constexpr std::size_t lnkctl2 = 0x30;   // PCI_EXP_LNKCTL2
inline constexpr std::uint16_t devctl_bcr_flr = 0x8000;  // PCI_EXP_DEVCTL_BCR_FLR: Initiate FLR
inline constexpr std::uint32_t devcap_flr = 0x10000000;  // PCI_EXP_DEVCAP_FLR
}  // namespace express

// Link speeds as Link Capabilities / Link Status encode them (PCI_EXP_LNKCAP_SLS_*).
enum class link_speed : std::uint8_t { gt2_5 = 1, gt5 = 2, gt8 = 3, gt16 = 4, gt32 = 5 };
struct link {
    link_speed speed = link_speed::gt16;
    std::uint8_t width = 16;  // lanes, 1..32
};

struct express_options {
    link max;            // Link Capabilities (and the Supported Link Speeds vector of LNKCAP2)
    link current;        // Link Status: what the link trained to
    std::uint8_t max_payload = 2;  // DEVCAP Max_Payload_Size encoding: 128 << n bytes (2: 512)
    bool flr = true;     // DEVCAP Function Level Reset Capable
};

// Writes the capability at `at` (4-byte aligned, in the first 256 bytes), linked to `next`.
void put_express_cap(std::span<std::byte> config, std::size_t at, std::uint8_t next, const express_options& o);

enum class express_effect : std::uint8_t { none, flr };
// A byte written at config offset `offset` inside the capability at `at`: keeps the writable
// bits; a write that sets Initiate FLR of a function with FLR capable asks for a reset.
express_effect express_cap_write(std::span<std::byte> config, std::size_t at, std::size_t offset, std::byte value);

}  // namespace rig::sim::pci
