#pragma once
// The kernel back end's two ways to an IOMMU, behind one small interface (the kernel VFIO
// selftests' "iommu mode" table idea, tools/testing/selftests/vfio/lib/iommu.c):
//   - container.cpp: /dev/vfio/vfio + /dev/vfio/<group>, VFIO_TYPE1v2_IOMMU (vfio.rst); the same
//     code with VFIO_NOIOMMU_IOMMU and /dev/vfio/noiommu-<group> for no-IOMMU mode
//     (drivers/vfio/group.c);
//   - iommufd.cpp: /dev/iommu + /dev/vfio/devices/vfioN, one IOAS (iommufd.rst).
// Either one hands back the device fd; everything after that (regions, IRQs, reset) is the
// same VFIO device API and lives in kernel_function.cpp.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "driver/error.hpp"
#include "driver/function.hpp"
#include "driver/iova.hpp"
#include "driver/vfio/fd.hpp"
#include "driver/vfio/sysfs.hpp"

namespace rig::driver::vfio {

// Where the device's DMA goes: an IOVA space (or, in no-IOMMU mode, physical memory).
class dma_space {
public:
    virtual ~dma_space() = default;
    dma_space() = default;
    dma_space(const dma_space&) = delete;
    dma_space& operator=(const dma_space&) = delete;

    // "type1v2 container", "iommufd", "no-IOMMU": for logs and errors
    virtual std::string_view mode_name() const noexcept = 0;
    // The ioctl behind map(), for limit messages: "VFIO_IOMMU_MAP_DMA", "IOMMU_IOAS_MAP".
    virtual std::string_view map_call() const noexcept = 0;
    virtual bool type1() const noexcept = 0;
    // false in no-IOMMU mode: the device sees physical addresses and there are no IOVAs to choose
    virtual bool translates() const noexcept { return true; }
    // IOVAs the IOMMU accepts, as it reported them, and the alignment a mapping needs
    virtual std::vector<iova_allocator::range> iova_ranges() const = 0;
    virtual std::uint64_t iova_alignment() const noexcept = 0;

    // Makes [va, va + bytes) reachable by the device at `iova`; returns the device address
    // (`iova`, or the physical address in no-IOMMU mode). The error carries the OS's errno.
    virtual result<std::uint64_t> map(const std::byte* va, std::uint64_t iova, std::uint64_t bytes,
                                      dma_access access) = 0;
    virtual result<void> unmap(std::uint64_t iova, std::uint64_t bytes) = 0;
    // Closes every fd it holds; the kernel drops the remaining mappings with them.
    virtual void close() noexcept = 0;
};

struct attached_device {
    std::unique_ptr<dma_space> space;
    unique_fd device;     // the VFIO device fd
    std::string how;      // "group 17", "vfio3": for the log
};

// The two paths. `f` is what sysfs says of the function (its group, its cdev).
result<attached_device> open_group_path(const pci_function& f, const open_options& options,
                                        const sysfs& sys, bool noiommu);
result<attached_device> open_iommufd_path(const pci_function& f, const open_options& options);

// What exists on this host for the function, and which path that leads to.
struct path_facts {
    bool dev_iommu = false;      // <dev>/iommu
    bool cdev = false;           // <sysfs>/.../vfio-dev/vfioN and <dev>/vfio/devices/vfioN
    bool group_node = false;     // <dev>/vfio/<group>
    bool noiommu_node = false;   // <dev>/vfio/noiommu-<group>
};
enum class path { group_type1v2, iommufd, noiommu };

// "open <path> on <who>: <strerror>", with a hint for the usual causes (ENOENT, EACCES, EBUSY).
error open_error(std::string_view path, std::string_view who, int err);

path_facts find_path_facts(const pci_function& f, const open_options& options);
// The path `asked` leads to given `facts`, or the error saying what is missing. No-IOMMU is
// chosen only when asked for by name; otherwise finding only a no-IOMMU group is refused.
result<path> choose_path(iommu_mode asked, const path_facts& facts, const pci_function& f,
                         const open_options& options);

}  // namespace rig::driver::vfio
