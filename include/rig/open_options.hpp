#pragma once
/// @file
/// How rig::nic::open reaches a PCI function (nic_options::open): the kernel VFIO back end's
/// IOMMU interface, and the vfio-user client's limits. The PCI layer uses these same types.
#include "rig/config.hpp"

#include <chrono>
#include <cstdint>
#include <string>

namespace rig {

/// How to reach the kernel VFIO back end's IOMMU (the kernel's Documentation/driver-api/vfio.rst
/// and Documentation/userspace-api/iommufd.rst).
enum class iommu_mode {
    automatic,              ///< iommufd + device cdev where the kernel has them, else group/type1v2
    group_type1v2,          ///< /dev/vfio/vfio container + /dev/vfio/N (N: the IOMMU group)
    iommufd,                ///< /dev/iommu + /dev/vfio/devices/vfioN
    unsafe_noiommu,         ///< /dev/vfio/noiommu-N: no isolation, the device sees physical
                            ///< addresses. Refused unless asked for by name.
};

/// How the PCI layer opens a function: kernel VFIO's IOMMU path and roots, the vfio-user
/// client's bounds.
struct open_options {
    iommu_mode iommu = iommu_mode::automatic;   ///< kernel VFIO: which IOMMU interface
    std::string sysfs_root = "/sys";   ///< where sysfs is (tests point this at a fixture tree)
    std::string dev_root = "/dev";     ///< where /dev is (the VFIO and iommufd nodes)
    /// Highest IOVA the device can address (edu: 28 bits); IOVAs are allocated below it.
    std::uint64_t dma_limit = ~std::uint64_t{0};
    /// vfio-user: how long one call waits for the server. Past it the connection is given up and
    /// every later call fails at once (a late reply would desynchronise the stream).
    std::chrono::milliseconds vfio_user_timeout{5000};
    /// vfio-user: announce DMA memory without its fd, so the server reaches it only through
    /// VFIO_USER_DMA_READ/WRITE messages, answered while one of our calls waits for its reply
    /// (for a server not trusted with the pages: the vfio-user specification's "Client memory
    /// access", QEMU docs/interop/vfio-user.rst). Slow.
    bool vfio_user_dma_by_message = false;
};

}  // namespace rig
