#include "driver/identify.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <vector>

namespace rig::driver {

namespace pci = abi::pci;

namespace {

constexpr std::uint32_t cfg_vendor_id = 0x00;
constexpr std::uint32_t cfg_device_id = 0x02;

std::string hex4(std::uint16_t v) {
    char s[8];
    std::snprintf(s, sizeof s, "%04x", v);
    return s;
}

// "1011-101f, 1021": runs of consecutive IDs as ranges, in ascending order.
std::string runs(std::vector<std::uint16_t> ids) {
    std::sort(ids.begin(), ids.end());
    std::string out;
    for (std::size_t i = 0; i < ids.size();) {
        std::size_t j = i;
        while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) {
            ++j;
        }
        out += (out.empty() ? "" : ", ") + hex4(ids[i]);
        if (j > i) {
            out += "-" + hex4(ids[j]);
        }
        i = j + 1;
    }
    return out;
}

std::string_view marketing_name(pci::family family) { return family == pci::family::mlx5 ? "ConnectX" : "Thor"; }

}  // namespace

std::string ids_of(pci::family family) {
    std::vector<std::uint16_t> ids;
    std::uint16_t vendor = 0;
    for (const pci::device_id& d : pci::devices) {
        if (d.family == family) {
            ids.push_back(d.device);
            vendor = d.vendor;
        }
    }
    return hex4(vendor) + ":" + runs(std::move(ids));
}

result<const pci::device_id*> identify(function& f) {
    const auto vendor = f.config_read16(cfg_vendor_id);
    const auto device = vendor ? f.config_read16(cfg_device_id) : vendor;
    if (!device) {
        return std::unexpected(error{std::string(f.name()) + ": reading its PCI IDs: " + device.error().message,
                                     device.error().os_errno});
    }
    const std::string ids = hex4(*vendor) + ":" + hex4(*device);
    if (*vendor == 0xffff) {
        // a read no function completes returns all ones (Linux: PCI_POSSIBLE_ERROR, include/linux/pci.h)
        return std::unexpected(error{std::string(f.name()) + ": reads all ones (PCI IDs " + ids +
                                         "): no function answers (removed, dead, or in reset)",
                                     ENODEV});
    }
    const pci::device_id* known = pci::find(*vendor, *device);
    if (known == nullptr) {
        return std::unexpected(error{std::string(f.name()) + ": " + ids + " is not a NIC Rig drives (" +
                                         std::string(marketing_name(pci::family::mlx5)) + ": " +
                                         ids_of(pci::family::mlx5) + "; " +
                                         std::string(marketing_name(pci::family::bnxt)) + ": " +
                                         ids_of(pci::family::bnxt) + ")",
                                     ENODEV});
    }
    return known;
}

}  // namespace rig::driver
