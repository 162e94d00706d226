// Which IOMMU path a function is opened through (the kernel's
// Documentation/driver-api/vfio.rst, "VFIO Usage Example" and "Device cdev Example"):
// iommufd + device cdev where the kernel has both, else the container/group path; no-IOMMU
// only when the caller names it.
#include <filesystem>
#include <system_error>

#include "driver/vfio/iommu.hpp"

namespace rig::driver::vfio {

namespace fs = std::filesystem;

namespace {
bool exists(const std::string& p) {
    std::error_code ec;
    return fs::exists(p, ec);
}

std::string group_node(const open_options& o, const pci_function& f, bool noiommu) {
    return o.dev_root + "/vfio/" + (noiommu ? "noiommu-" : "") + std::to_string(f.iommu_group.value_or(0));
}

error refuse_noiommu(const pci_function& f, const open_options& o) {
    return fail("open", f.bdf,
                "only a no-IOMMU VFIO group exists (" + group_node(o, f, true) +
                    "): the kernel runs VFIO without an IOMMU, so the device would DMA to "
                    "physical addresses with no isolation from the rest of the host; Rig does "
                    "this only when asked by name: open_options.iommu = iommu_mode::unsafe_noiommu",
                EPERM);
}
}  // namespace

error open_error(std::string_view path, std::string_view who, int err) {
    error e = os_error("open " + std::string(path), who, err);
    if (err == ENOENT) {
        e.message += " (is the function bound to vfio-pci and the vfio module loaded?)";
    } else if (err == EACCES || err == EPERM) {
        e.message += " (run as root, or give this user the VFIO device node)";
    } else if (err == EBUSY) {
        e.message += " (another process, or another function of the same IOMMU group in this "
                     "one, holds it)";
    }
    return e;
}

path_facts find_path_facts(const pci_function& f, const open_options& options) {
    path_facts facts;
    facts.dev_iommu = exists(options.dev_root + "/iommu");
    facts.cdev = !f.vfio_cdev.empty() && exists(options.dev_root + "/vfio/devices/" + f.vfio_cdev);
    if (f.iommu_group) {
        facts.group_node = exists(group_node(options, f, false));
        facts.noiommu_node = exists(group_node(options, f, true));
    }
    return facts;
}

result<path> choose_path(iommu_mode asked, const path_facts& facts, const pci_function& f,
                         const open_options& options) {
    switch (asked) {
    case iommu_mode::unsafe_noiommu:
        if (facts.noiommu_node) {
            return path::noiommu;
        }
        return std::unexpected(fail("open", f.bdf,
                                    "no-IOMMU mode asked for, but there is no " +
                                        group_node(options, f, true) +
                                        (facts.group_node ? " (the function has a real IOMMU group: "
                                                            "use iommu_mode::automatic)"
                                                          : " (enable it with: echo 1 > "
                                                            "/sys/module/vfio/parameters/"
                                                            "enable_unsafe_noiommu_mode, then "
                                                            "rebind the function to vfio-pci)"),
                                    ENODEV));
    case iommu_mode::iommufd:
        if (facts.dev_iommu && facts.cdev) {
            return path::iommufd;
        }
        return std::unexpected(fail("open", f.bdf,
                                    std::string("iommufd asked for, but ") +
                                        (!facts.dev_iommu ? options.dev_root + "/iommu is missing (kernel without CONFIG_IOMMUFD?)"
                                                          : "the function has no VFIO device cdev (no vfio-dev/vfioN in sysfs or no " +
                                                                options.dev_root + "/vfio/devices/" + f.vfio_cdev +
                                                                "; kernel without CONFIG_VFIO_DEVICE_CDEV?)"),
                                    ENODEV));
    case iommu_mode::group_type1v2:
        if (facts.group_node) {
            return path::group_type1v2;
        }
        if (facts.noiommu_node) {
            return std::unexpected(refuse_noiommu(f, options));
        }
        return std::unexpected(fail("open", f.bdf,
                                    "no VFIO group node " + group_node(options, f, false) +
                                        " (is the function bound to vfio-pci?)",
                                    ENODEV));
    case iommu_mode::automatic:
        if (facts.dev_iommu && facts.cdev) {
            return path::iommufd;
        }
        if (facts.group_node) {
            return path::group_type1v2;
        }
        if (facts.noiommu_node) {
            return std::unexpected(refuse_noiommu(f, options));
        }
        return std::unexpected(fail("open", f.bdf,
                                    "neither a VFIO group node (" + group_node(options, f, false) +
                                        ") nor a VFIO device cdev with " + options.dev_root +
                                        "/iommu exists (is the function bound to vfio-pci?)",
                                    ENODEV));
    }
    return std::unexpected(fail("open", f.bdf, "unknown iommu_mode", EINVAL));
}

}  // namespace rig::driver::vfio
