#pragma once
// The PCI functions Rig drives, one list for every layer: sysfs discovery and rig-devbind
// (driver/vfio/sysfs), rig::nic::open's choice of family (driver/identify.hpp), and the device
// model's config space (sim/mlx5).
//
// Every entry is in the Linux driver's own table for its family, and test/unit/pci_ids holds it
// there by reading the tables out of linux-source-6.12 at build time:
//   mlx5: mlx5_core_pci_table, drivers/net/ethernet/mellanox/mlx5/core/main.c (a VF carries
//         MLX5_PCI_DEV_IS_VF; names are the table's comments);
//   bnxt: bnxt_pci_tbl, drivers/net/ethernet/broadcom/bnxt/bnxt.c, Thor only: P5 (BCM5750x)
//         and P7 (BCM5760x) functions (bnxt.h CHIP_NUM_*; names from board_info).
// BCM58818 (0xd818, P7) is in Broadcom's out-of-tree bnxt_en only, not in 6.12's table: it is
// left out until a kernel the tests read lists it.
#include <cstdint>
#include <string_view>

namespace rig::abi::pci {

enum class family : std::uint8_t { mlx5, bnxt };

constexpr std::string_view to_string(family f) noexcept { return f == family::mlx5 ? "mlx5" : "bnxt"; }

// include/linux/pci_ids.h PCI_VENDOR_ID_MELLANOX, PCI_VENDOR_ID_BROADCOM
inline constexpr std::uint16_t vendor_mellanox = 0x15b3;
inline constexpr std::uint16_t vendor_broadcom = 0x14e4;

struct device_id {
    std::uint16_t vendor;
    std::uint16_t device;
    pci::family family;
    std::string_view name;   // "ConnectX-6 Dx", "BCM57508"
    bool vf;
};

inline constexpr device_id devices[] = {
    {vendor_mellanox, 0x1011, family::mlx5, "Connect-IB", false},
    {vendor_mellanox, 0x1012, family::mlx5, "Connect-IB VF", true},
    {vendor_mellanox, 0x1013, family::mlx5, "ConnectX-4", false},
    {vendor_mellanox, 0x1014, family::mlx5, "ConnectX-4 VF", true},
    {vendor_mellanox, 0x1015, family::mlx5, "ConnectX-4 Lx", false},
    {vendor_mellanox, 0x1016, family::mlx5, "ConnectX-4 Lx VF", true},
    {vendor_mellanox, 0x1017, family::mlx5, "ConnectX-5", false},
    {vendor_mellanox, 0x1018, family::mlx5, "ConnectX-5 VF", true},
    {vendor_mellanox, 0x1019, family::mlx5, "ConnectX-5 Ex", false},
    {vendor_mellanox, 0x101a, family::mlx5, "ConnectX-5 Ex VF", true},
    {vendor_mellanox, 0x101b, family::mlx5, "ConnectX-6", false},
    {vendor_mellanox, 0x101c, family::mlx5, "ConnectX-6 VF", true},
    {vendor_mellanox, 0x101d, family::mlx5, "ConnectX-6 Dx", false},
    {vendor_mellanox, 0x101e, family::mlx5, "ConnectX VF", true},
    {vendor_mellanox, 0x101f, family::mlx5, "ConnectX-6 Lx", false},
    {vendor_mellanox, 0x1021, family::mlx5, "ConnectX-7", false},
    {vendor_mellanox, 0x1023, family::mlx5, "ConnectX-8", false},
    {vendor_mellanox, 0x1025, family::mlx5, "ConnectX-9", false},
    {vendor_mellanox, 0x1027, family::mlx5, "ConnectX-10", false},
    {vendor_mellanox, 0x2101, family::mlx5, "ConnectX-10 NVLink-C2C", false},
    {vendor_mellanox, 0xa2d2, family::mlx5, "BlueField", false},
    {vendor_mellanox, 0xa2d3, family::mlx5, "BlueField VF", true},
    {vendor_mellanox, 0xa2d6, family::mlx5, "BlueField-2", false},
    {vendor_mellanox, 0xa2dc, family::mlx5, "BlueField-3", false},
    {vendor_mellanox, 0xa2df, family::mlx5, "BlueField-4", false},
    {vendor_broadcom, 0x1750, family::bnxt, "BCM57508", false},
    {vendor_broadcom, 0x1751, family::bnxt, "BCM57504", false},
    {vendor_broadcom, 0x1752, family::bnxt, "BCM57502", false},
    {vendor_broadcom, 0x1760, family::bnxt, "BCM57608", false},
    {vendor_broadcom, 0x1761, family::bnxt, "BCM57604", false},
    {vendor_broadcom, 0x1762, family::bnxt, "BCM57602", false},
    {vendor_broadcom, 0x1763, family::bnxt, "BCM57601", false},
    {vendor_broadcom, 0x1800, family::bnxt, "BCM57502 NPAR", false},
    {vendor_broadcom, 0x1801, family::bnxt, "BCM57504 NPAR", false},
    {vendor_broadcom, 0x1802, family::bnxt, "BCM57508 NPAR", false},
    {vendor_broadcom, 0x1803, family::bnxt, "BCM57502 NPAR", false},
    {vendor_broadcom, 0x1804, family::bnxt, "BCM57504 NPAR", false},
    {vendor_broadcom, 0x1805, family::bnxt, "BCM57508 NPAR", false},
    {vendor_broadcom, 0x1806, family::bnxt, "BCM5750x VF", true},
    {vendor_broadcom, 0x1807, family::bnxt, "BCM5750x VF", true},
    {vendor_broadcom, 0x1808, family::bnxt, "BCM5750x VF (Hyper-V)", true},
    {vendor_broadcom, 0x1809, family::bnxt, "BCM5750x VF (Hyper-V)", true},
    {vendor_broadcom, 0x1819, family::bnxt, "BCM5760x VF", true},
    {vendor_broadcom, 0x181b, family::bnxt, "BCM5760x VF (Hyper-V)", true},
};

// The entry for a function's IDs, or nullptr for a function Rig does not drive.
constexpr const device_id* find(std::uint16_t vendor, std::uint16_t device) noexcept {
    for (const device_id& d : devices) {
        if (d.vendor == vendor && d.device == device) {
            return &d;
        }
    }
    return nullptr;
}

// The entry named `name`, at compile time: a name not in the list does not compile.
consteval const device_id& named(std::string_view name) {
    for (const device_id& d : devices) {
        if (d.name == name) {
            return d;
        }
    }
    throw "abi/pci_ids.hpp: no device of that name";
}

// The function the device model presents as a ConnectX (sim/mlx5 config space).
inline constexpr const device_id& connectx6dx = named("ConnectX-6 Dx");
// The function the bnxt model will present (issue 14 §2).
inline constexpr const device_id& bcm57508 = named("BCM57508");

}  // namespace rig::abi::pci
