#pragma once
// IOVA allocation for one function: the device addresses DMA memory by IOVAs we choose, inside
// the ranges the IOMMU allows (VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE, IOMMU_IOAS_IOVA_RANGES) and
// below the device's DMA limit. First fit over a sorted free list, ranges aligned to `align`;
// a freed range merges with its neighbours. Control path only.
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace rig::driver {

class iova_allocator {
public:
    struct range {
        std::uint64_t first, last;   // inclusive
    };

    // Usable IOVAs: the given ranges, clipped to [floor, limit]. IOVA 0 is never handed out:
    // a zero address in a device structure usually means "none".
    iova_allocator(std::vector<range> allowed, std::uint64_t limit, std::uint64_t floor = 0x10000);

    std::optional<std::uint64_t> allocate(std::uint64_t bytes, std::uint64_t align);
    // Gives back exactly a range allocate returned; false if it was not allocated.
    bool release(std::uint64_t iova, std::uint64_t bytes);
    std::uint64_t free_bytes() const;

private:
    std::map<std::uint64_t, std::uint64_t> _free;   // first -> last (inclusive)
    std::map<std::uint64_t, std::uint64_t> _used;   // first -> bytes
};

}  // namespace rig::driver
