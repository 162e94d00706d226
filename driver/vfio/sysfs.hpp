#pragma once
// PCI functions as sysfs shows them, under a configurable root so tests use a fixture tree.
//
//   <root>/bus/pci/devices/<bdf>/{vendor,device,class}   "0x15b3\n", "0x1017\n", "0x020000\n"
//   <root>/bus/pci/devices/<bdf>/driver        -> ../../../bus/pci/drivers/<name>   (absent: none)
//   <root>/bus/pci/devices/<bdf>/iommu_group   -> ../../../kernel/iommu_groups/<N> (absent: no IOMMU)
//   <root>/bus/pci/devices/<bdf>/driver_override   "(null)\n" when unset
//   <root>/bus/pci/devices/<bdf>/vfio-dev/vfio<M>  the VFIO device cdev (Linux >= 6.6)
//   <root>/bus/pci/devices/<bdf>/net/<ifname>      its network interfaces
// (the kernel's Documentation/ABI/testing/sysfs-bus-pci and sysfs-kernel-iommu_groups;
// Documentation/driver-api/vfio.rst)
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abi/pci_ids.hpp"
#include "driver/error.hpp"

namespace rig::driver::vfio {

// "0000:bb:dd.f" in lower- or upper-case hexadecimal
bool is_pci_address(std::string_view s);

// First line of a small sysfs or procfs file, without its newline; nullopt when unreadable.
std::optional<std::string> read_line(const std::string& path);
// That line as a decimal number (module parameters, hugepage counts); nullopt when unreadable or
// not a number.
std::optional<std::uint64_t> read_decimal(const std::string& path);

// The functions Rig drives are abi/pci_ids.hpp's list: one list for discovery, rig-devbind,
// rig::nic::open and the device model.
using known_device = abi::pci::device_id;

struct pci_function {
    std::string bdf;
    std::uint16_t vendor = 0;
    std::uint16_t device = 0;
    std::uint32_t class_code = 0;
    std::optional<unsigned> iommu_group;
    std::string driver;            // "" when bound to none
    std::string driver_override;   // "" when unset
    std::string vfio_cdev;         // "vfio3" when the kernel made a VFIO device cdev for it
    std::vector<std::string> net_interfaces;
    const known_device* known = nullptr;   // abi::pci::find(vendor, device)
};

class sysfs {
public:
    explicit sysfs(std::string root = "/sys") : _root(std::move(root)) {}
    const std::string& root() const noexcept { return _root; }

    std::string devices_dir() const { return _root + "/bus/pci/devices"; }
    std::string device_dir(std::string_view bdf) const { return devices_dir() + "/" + std::string(bdf); }
    std::string drivers_dir() const { return _root + "/bus/pci/drivers"; }
    std::string drivers_probe() const { return _root + "/bus/pci/drivers_probe"; }

    // One function; an error names the function when it is absent or unreadable.
    result<pci_function> function(std::string_view bdf) const;
    // Every PCI function, in address order.
    result<std::vector<pci_function>> functions() const;
    // The mlx5 and bnxt functions, and any other function bound to vfio-pci.
    result<std::vector<pci_function>> rig_functions() const;
    // The functions sharing IOMMU group `group`, from <root>/kernel/iommu_groups/<N>/devices.
    std::vector<std::string> group_members(unsigned group) const;

private:
    std::string _root;
};

}  // namespace rig::driver::vfio
