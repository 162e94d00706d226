// The iommufd path: the function's VFIO device cdev (/dev/vfio/devices/vfioN, Linux >= 6.6)
// bound to an iommufd (/dev/iommu, Linux >= 6.2) and attached to one IO address space (IOAS)
// of our own. Sequence from Documentation/driver-api/vfio.rst "Device cdev Example" and
// Documentation/userspace-api/iommufd.rst: open cdev, open /dev/iommu, BIND_IOMMUFD, IOAS_ALLOC,
// ATTACH_IOMMUFD_PT, then IOAS_IOVA_RANGES (the ranges narrow on attach, so only after it).
// We always choose the IOVA (IOMMU_IOAS_MAP_FIXED_IOVA): left to itself the kernel may pick
// one above what the device can address (include/uapi/linux/iommufd.h, struct
// iommu_ioas_map: without IOMMU_IOAS_MAP_FIXED_IOVA the kernel computes the IOVA).
#include <fcntl.h>
#include <sys/ioctl.h>

#include <vector>

#include "driver/log.hpp"
#include "driver/vfio/iommu.hpp"
#include "driver/vfio/uapi.hpp"

namespace rig::driver::vfio {

namespace {

class iommufd_space final : public dma_space {
public:
    iommufd_space(unique_fd iommufd, std::uint32_t ioas, std::string bdf)
        : _iommufd(std::move(iommufd)), _ioas(ioas), _bdf(std::move(bdf)) {}
    ~iommufd_space() override { close(); }

    std::string_view mode_name() const noexcept override { return "iommufd"; }
    std::string_view map_call() const noexcept override { return "IOMMU_IOAS_MAP"; }
    bool type1() const noexcept override { return false; }
    std::vector<iova_allocator::range> iova_ranges() const override { return _ranges; }
    std::uint64_t iova_alignment() const noexcept override { return _alignment; }

    // IOMMU_IOAS_IOVA_RANGES: -EMSGSIZE and the count needed when the array is too small, so
    // ask with none first, then with room for all (again if it grew in between).
    result<void> query_ranges() {
        std::vector<uapi::iommu_iova_range> ranges;
        for (int pass = 0; pass < 4; ++pass) {
            uapi::iommu_ioas_iova_ranges q{};
            q.size = sizeof q;
            q.ioas_id = _ioas;
            q.num_iovas = static_cast<std::uint32_t>(ranges.size());
            q.allowed_iovas = reinterpret_cast<std::uintptr_t>(ranges.data());
            if (ioctl(_iommufd.get(), uapi::iommu_ioas_iova_ranges_ioctl, &q) == 0) {
                ranges.resize(q.num_iovas);
                _ranges.clear();
                for (const auto& r : ranges) {
                    _ranges.push_back({r.start, r.last});
                }
                _alignment = q.out_iova_alignment > 4096 ? q.out_iova_alignment : 4096;
                return {};
            }
            if (errno != EMSGSIZE) {
                return std::unexpected(os_error("IOMMU_IOAS_IOVA_RANGES", _bdf, errno));
            }
            ranges.assign(q.num_iovas, {});
        }
        return std::unexpected(fail("IOMMU_IOAS_IOVA_RANGES", _bdf, "the range count kept changing", EPROTO));
    }

    result<std::uint64_t> map(const std::byte* va, std::uint64_t iova, std::uint64_t bytes,
                              dma_access access) override {
        uapi::iommu_ioas_map m{};
        m.size = sizeof m;
        m.flags = uapi::ioas_map_fixed_iova;
        if ((static_cast<unsigned>(access) & static_cast<unsigned>(dma_access::read)) != 0) {
            m.flags |= uapi::ioas_map_readable;   // the device reads the memory
        }
        if ((static_cast<unsigned>(access) & static_cast<unsigned>(dma_access::write)) != 0) {
            m.flags |= uapi::ioas_map_writeable;
        }
        m.ioas_id = _ioas;
        m.user_va = reinterpret_cast<std::uintptr_t>(va);
        m.length = bytes;
        m.iova = iova;
        if (ioctl(_iommufd.get(), uapi::iommu_ioas_map_ioctl, &m) != 0) {
            return std::unexpected(os_error("IOMMU_IOAS_MAP", _bdf, errno));
        }
        return iova;
    }

    result<void> unmap(std::uint64_t iova, std::uint64_t bytes) override {
        uapi::iommu_ioas_unmap u{};
        u.size = sizeof u;
        u.ioas_id = _ioas;
        u.iova = iova;
        u.length = bytes;
        if (ioctl(_iommufd.get(), uapi::iommu_ioas_unmap_ioctl, &u) != 0) {
            return std::unexpected(os_error("IOMMU_IOAS_UNMAP", _bdf, errno));
        }
        return {};
    }

    void close() noexcept override {
        // closing the iommufd destroys the IOAS and unpins what is still mapped in it
        _iommufd.reset();
    }

private:
    unique_fd _iommufd;
    std::uint32_t _ioas;
    std::string _bdf;
    std::vector<iova_allocator::range> _ranges;
    std::uint64_t _alignment = 4096;
};

}  // namespace

result<attached_device> open_iommufd_path(const pci_function& f, const open_options& options) {
    const std::string& bdf = f.bdf;
    const std::string cdev_path = options.dev_root + "/vfio/devices/" + f.vfio_cdev;
    const std::string iommu_path = options.dev_root + "/iommu";

    unique_fd device(::open(cdev_path.c_str(), O_RDWR | O_CLOEXEC));
    if (!device) {
        return std::unexpected(open_error(cdev_path, bdf, errno));
    }
    unique_fd iommufd(::open(iommu_path.c_str(), O_RDWR | O_CLOEXEC));
    if (!iommufd) {
        return std::unexpected(open_error(iommu_path, bdf, errno));
    }
    // claims DMA ownership of the function; until this succeeds the cdev allows nothing
    uapi::vfio_device_bind_iommufd bind{};
    bind.argsz = sizeof bind;
    bind.iommufd = iommufd.get();
    if (ioctl(device.get(), uapi::device_bind_iommufd, &bind) != 0) {
        return std::unexpected(os_error("VFIO_DEVICE_BIND_IOMMUFD", bdf, errno));
    }
    uapi::iommu_ioas_alloc alloc{};
    alloc.size = sizeof alloc;
    if (ioctl(iommufd.get(), uapi::iommu_ioas_alloc_ioctl, &alloc) != 0) {
        return std::unexpected(os_error("IOMMU_IOAS_ALLOC", bdf, errno));
    }
    uapi::vfio_device_attach_iommufd_pt attach{};
    attach.argsz = sizeof attach;
    attach.pt_id = alloc.out_ioas_id;
    if (ioctl(device.get(), uapi::device_attach_iommufd_pt, &attach) != 0) {
        return std::unexpected(os_error("VFIO_DEVICE_ATTACH_IOMMUFD_PT", bdf, errno));
    }
    auto space = std::make_unique<iommufd_space>(std::move(iommufd), alloc.out_ioas_id, bdf);
    if (auto r = space->query_ranges(); !r) {
        return std::unexpected(r.error());
    }
    log().debug("{}: iommufd: {} bound as device {}, IOAS {}, page table {}, {} IOVA ranges, "
                "alignment {:#x}",
                bdf, f.vfio_cdev, bind.out_devid, alloc.out_ioas_id, attach.pt_id,
                space->iova_ranges().size(), space->iova_alignment());
    return attached_device{std::move(space), std::move(device), f.vfio_cdev};
}

}  // namespace rig::driver::vfio
