// The legacy VFIO path: a container (/dev/vfio/vfio) holding the function's IOMMU group
// (/dev/vfio/<N>), with the type1v2 IOMMU. The sequence is the kernel's own
// (Documentation/driver-api/vfio.rst, "VFIO Usage Example"): API
// version, extension check, group viable, group into the container, and only then
// SET_IOMMU, then the device fd from the group.
//
// No-IOMMU mode (drivers/vfio/group.c, CONFIG_VFIO_NOIOMMU) is this path with /dev/vfio/noiommu-<N>
// and VFIO_NOIOMMU_IOMMU: the container then supports no DMA ioctls, and the device reaches memory
// by physical address, read from /proc/self/pagemap. Only reached when the caller asks for it by
// name.
#include <fcntl.h>
#include <linux/vfio.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <vector>

#include "abi/bits.hpp"
#include "driver/log.hpp"
#include "driver/vfio/caps.hpp"
#include "driver/vfio/iommu.hpp"

namespace rig::driver::vfio {

namespace {

using ::rig::abi::hex;  // "0x1f" in messages

class container_space final : public dma_space {
public:
    container_space(unique_fd container, unique_fd group, std::string bdf, bool noiommu,
                    std::uint64_t dma_limit)
        : _container(std::move(container)), _group(std::move(group)), _bdf(std::move(bdf)),
          _noiommu(noiommu), _dma_limit(dma_limit) {}
    ~container_space() override { close(); }

    std::string_view mode_name() const noexcept override {
        return _noiommu ? "no-IOMMU (unsafe)" : "type1v2 container";
    }
    std::string_view map_call() const noexcept override { return "VFIO_IOMMU_MAP_DMA"; }
    bool type1() const noexcept override { return true; }
    bool translates() const noexcept override { return !_noiommu; }

    std::vector<iova_allocator::range> iova_ranges() const override {
        if (_info.iova_ranges.empty()) {
            // Kernels before 5.4 do not report ranges; the whole space then, as they allow.
            return {{0, ~std::uint64_t{0}}};
        }
        return _info.iova_ranges;
    }
    std::uint64_t iova_alignment() const noexcept override {
        // the smallest IOMMU page size: the lowest bit of the page-size bitmap
        const std::uint64_t p = _info.iova_pgsizes & (~_info.iova_pgsizes + 1);
        return p != 0 ? p : 4096;
    }

    // VFIO_IOMMU_GET_INFO, two passes: the first learns the size the capabilities need.
    result<void> query_info() {
        std::vector<std::uint64_t> buf((sizeof(vfio_iommu_type1_info) + 7) / 8, 0);
        for (int pass = 0; pass < 3; ++pass) {
            auto* info = reinterpret_cast<vfio_iommu_type1_info*>(buf.data());
            const auto size = static_cast<std::uint32_t>(buf.size() * 8);
            info->argsz = size;
            if (ioctl(_container.get(), VFIO_IOMMU_GET_INFO, info) != 0) {
                return std::unexpected(os_error("VFIO_IOMMU_GET_INFO", _bdf, errno));
            }
            if (info->argsz <= size) {
                const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(buf.data()),
                                                       info->argsz);
                auto parsed = parse_type1_info(bytes, _bdf);
                if (!parsed) {
                    return std::unexpected(parsed.error());
                }
                _info = std::move(*parsed);
                return {};
            }
            buf.assign((info->argsz + 7) / 8, 0);
        }
        return std::unexpected(fail("VFIO_IOMMU_GET_INFO", _bdf, "the answer kept growing", EPROTO));
    }
    const type1_info& info() const noexcept { return _info; }

    result<std::uint64_t> map(const std::byte* va, std::uint64_t iova, std::uint64_t bytes,
                              dma_access access) override {
        if (_noiommu) {
            return physical_address(va, bytes);
        }
        vfio_iommu_type1_dma_map m{};
        m.argsz = sizeof m;
        // VFIO_DMA_MAP_FLAG_READ (1) / _WRITE (2): the device may read / write the memory,
        // the same bits as dma_access
        m.flags = static_cast<std::uint32_t>(access);
        m.vaddr = reinterpret_cast<std::uintptr_t>(va);
        m.iova = iova;
        m.size = bytes;
        if (ioctl(_container.get(), VFIO_IOMMU_MAP_DMA, &m) != 0) {
            return std::unexpected(os_error("VFIO_IOMMU_MAP_DMA", _bdf, errno));
        }
        return iova;
    }

    result<void> unmap(std::uint64_t iova, std::uint64_t bytes) override {
        if (_noiommu) {
            return {};
        }
        vfio_iommu_type1_dma_unmap u{};
        u.argsz = sizeof u;
        u.iova = iova;
        u.size = bytes;
        if (ioctl(_container.get(), VFIO_IOMMU_UNMAP_DMA, &u) != 0) {
            return std::unexpected(os_error("VFIO_IOMMU_UNMAP_DMA", _bdf, errno));
        }
        // the kernel returns how much it unmapped; less means the range was not one mapping
        if (u.size != bytes) {
            return std::unexpected(fail("VFIO_IOMMU_UNMAP_DMA", _bdf,
                                        "unmapped " + std::to_string(u.size) + " of " +
                                            std::to_string(bytes) + " bytes at " + hex(iova),
                                        EINVAL));
        }
        return {};
    }

    void close() noexcept override {
        // closing the group takes it out of the container; the container's last group gone,
        // the kernel unmaps and unpins everything left
        _group.reset();
        _container.reset();
    }

private:
    // No-IOMMU: the physical address of [va, va + bytes), which must be contiguous (a hugetlb
    // page is; separate 4 KiB pages rarely are). PFNs read as 0 without CAP_SYS_ADMIN (Linux
    // >= 4.0). Nothing pins the pages here, which is one reason this mode is unsafe.
    result<std::uint64_t> physical_address(const std::byte* va, std::uint64_t bytes) const {
        constexpr std::uint64_t page = 4096;
        const auto first = reinterpret_cast<std::uintptr_t>(va) / page;
        const std::uint64_t count = (bytes + page - 1) / page;
        unique_fd pm(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
        if (!pm) {
            return std::unexpected(os_error("open /proc/self/pagemap", _bdf, errno));
        }
        std::vector<std::uint64_t> entries(count);
        const auto want = static_cast<ssize_t>(count * sizeof(std::uint64_t));
        if (pread(pm.get(), entries.data(), static_cast<std::size_t>(want),
                  static_cast<off_t>(first * sizeof(std::uint64_t))) != want) {
            return std::unexpected(os_error("read /proc/self/pagemap", _bdf, errno != 0 ? errno : EIO));
        }
        constexpr std::uint64_t present = 1ull << 63;
        constexpr std::uint64_t pfn_mask = (1ull << 55) - 1;
        std::uint64_t pfn0 = 0;
        for (std::uint64_t i = 0; i < count; ++i) {
            const std::uint64_t e = entries[i];
            if ((e & present) == 0 || (e & pfn_mask) == 0) {
                return std::unexpected(fail("no-IOMMU dma_map", _bdf,
                                            "physical address unknown (page not present, or "
                                            "no CAP_SYS_ADMIN to read /proc/self/pagemap PFNs)",
                                            EPERM));
            }
            if (i == 0) {
                pfn0 = e & pfn_mask;
            } else if ((e & pfn_mask) != pfn0 + i) {
                return std::unexpected(fail("no-IOMMU dma_map", _bdf,
                                            "memory is not physically contiguous; use hugetlb "
                                            "memory and map at most one huge page at a time",
                                            EINVAL));
            }
        }
        const std::uint64_t pa = pfn0 * page + reinterpret_cast<std::uintptr_t>(va) % page;
        if (pa + bytes - 1 > _dma_limit) {
            return std::unexpected(fail("no-IOMMU dma_map", _bdf,
                                        "physical address " + hex(pa) + " lies above dma_limit " +
                                            hex(_dma_limit),
                                        ERANGE));
        }
        return pa;
    }

    unique_fd _container;
    unique_fd _group;
    std::string _bdf;
    bool _noiommu;
    std::uint64_t _dma_limit;
    type1_info _info;
};

// VIABLE is clear when some function of the group is bound to a driver other than vfio-pci:
// name them, since that is what the user must change.
error not_viable(const pci_function& f, const sysfs& sys, unsigned group) {
    std::string others;
    for (const std::string& member : sys.group_members(group)) {
        if (member == f.bdf) {
            continue;
        }
        auto m = sys.function(member);
        if (m && !m->driver.empty() && m->driver != "vfio-pci") {
            others += (others.empty() ? "" : ", ") + member + " (bound to " + m->driver + ")";
        }
    }
    std::string why = "IOMMU group " + std::to_string(group) +
                      " is not viable: every function in it must be bound to vfio-pci or to no driver";
    if (!others.empty()) {
        why += "; not so: " + others;
    }
    return fail("VFIO_GROUP_GET_STATUS", f.bdf, why, EBUSY);
}

}  // namespace

result<attached_device> open_group_path(const pci_function& f, const open_options& options,
                                        const sysfs& sys, bool noiommu) {
    const std::string& bdf = f.bdf;
    const unsigned group = f.iommu_group.value_or(0);
    const std::string container_path = options.dev_root + "/vfio/vfio";
    const std::string group_path = options.dev_root + "/vfio/" + (noiommu ? "noiommu-" : "") +
                                   std::to_string(group);

    unique_fd container(::open(container_path.c_str(), O_RDWR | O_CLOEXEC));
    if (!container) {
        return std::unexpected(open_error(container_path, bdf, errno));
    }
    const int version = ioctl(container.get(), VFIO_GET_API_VERSION);
    if (version < 0) {
        return std::unexpected(os_error("VFIO_GET_API_VERSION", bdf, errno));
    }
    if (version != VFIO_API_VERSION) {
        return std::unexpected(fail("VFIO_GET_API_VERSION", bdf,
                                    "the kernel speaks VFIO API " + std::to_string(version) +
                                        ", not " + std::to_string(VFIO_API_VERSION),
                                    EPROTO));
    }
    const unsigned long type = noiommu ? VFIO_NOIOMMU_IOMMU : VFIO_TYPE1v2_IOMMU;
    const int has = ioctl(container.get(), VFIO_CHECK_EXTENSION, type);
    if (has < 0) {
        return std::unexpected(os_error("VFIO_CHECK_EXTENSION", bdf, errno));
    }
    if (has == 0) {
        return std::unexpected(fail("VFIO_CHECK_EXTENSION", bdf,
                                    noiommu ? "the kernel's VFIO has no no-IOMMU mode "
                                              "(CONFIG_VFIO_NOIOMMU, enable_unsafe_noiommu_mode)"
                                            : "the kernel's VFIO offers no type1v2 IOMMU (is the "
                                              "vfio_iommu_type1 module loaded?)",
                                    ENODEV));
    }

    unique_fd grp(::open(group_path.c_str(), O_RDWR | O_CLOEXEC));
    if (!grp) {
        return std::unexpected(open_error(group_path, bdf, errno));
    }
    vfio_group_status status{};
    status.argsz = sizeof status;
    if (ioctl(grp.get(), VFIO_GROUP_GET_STATUS, &status) != 0) {
        return std::unexpected(os_error("VFIO_GROUP_GET_STATUS", bdf, errno));
    }
    if ((status.flags & VFIO_GROUP_FLAGS_VIABLE) == 0) {
        return std::unexpected(not_viable(f, sys, group));
    }
    int cfd = container.get();
    if (ioctl(grp.get(), VFIO_GROUP_SET_CONTAINER, &cfd) != 0) {
        return std::unexpected(os_error("VFIO_GROUP_SET_CONTAINER", bdf, errno));
    }
    // SET_IOMMU only once a group is in the container (the kernel refuses it before)
    if (ioctl(container.get(), VFIO_SET_IOMMU, type) != 0) {
        return std::unexpected(os_error("VFIO_SET_IOMMU", bdf, errno));
    }
    // GROUP_GET_DEVICE_FD takes the device's name, which for PCI is its sysfs address; the
    // kernel hands it out only once the container has its IOMMU
    unique_fd device(ioctl(grp.get(), VFIO_GROUP_GET_DEVICE_FD, bdf.c_str()));
    if (!device) {
        return std::unexpected(os_error("VFIO_GROUP_GET_DEVICE_FD", bdf, errno));
    }
    auto space = std::make_unique<container_space>(std::move(container), std::move(grp), bdf,
                                                   noiommu, options.dma_limit);
    if (!noiommu) {
        if (auto r = space->query_info(); !r) {
            return std::unexpected(r.error());
        }
        const type1_info& info = space->info();
        log().debug("{}: type1v2 IOMMU, page sizes {:#x}, {} IOVA ranges{}", bdf, info.iova_pgsizes,
                    info.iova_ranges.size(),
                    info.has_dma_avail ? ", " + std::to_string(info.dma_avail) + " mappings available"
                                       : std::string{});
    } else {
        log().warn("{}: VFIO no-IOMMU mode: the device DMAs to physical addresses with no "
                   "isolation (asked for by name)", bdf);
    }
    return attached_device{std::move(space), std::move(device),
                           (noiommu ? "no-IOMMU group " : "group ") + std::to_string(group)};
}

}  // namespace rig::driver::vfio
