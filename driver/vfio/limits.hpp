#pragma once
// Why a DMA mapping was refused, in words that name the limit and how to raise it.
//
// Two limits stop VFIO_IOMMU_MAP_DMA / IOMMU_IOAS_MAP long before memory runs out:
//  - vfio_iommu_type1's dma_entry_limit (module parameter, default 65535): the number of
//    mappings one container may hold; past it MAP_DMA fails with ENOSPC.
//  - RLIMIT_MEMLOCK: pinned pages are charged to it (type1 per process, iommufd per user by
//    default); past it the map fails with ENOMEM. CAP_IPC_LOCK exempts a process.
// A bare "Cannot allocate memory" sends people looking for a leak, hence this.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "driver/error.hpp"

namespace rig::driver::vfio {

struct map_limits {
    std::optional<std::uint64_t> dma_entry_limit;   // nullopt: unknown (module not loaded here)
    std::optional<std::uint64_t> memlock_bytes;     // soft RLIMIT_MEMLOCK; nullopt: unlimited
};

// <sysfs_root>/module/vfio_iommu_type1/parameters/dma_entry_limit and getrlimit(RLIMIT_MEMLOCK).
map_limits read_map_limits(std::string_view sysfs_root);

struct map_attempt {
    bool type1 = true;                // VFIO_IOMMU_MAP_DMA (else IOMMU_IOAS_MAP)
    std::uint64_t bytes = 0;          // asked for
    std::uint64_t mapped_bytes = 0;   // already mapped for this function
    std::size_t mappings = 0;         // mappings this function holds
    map_limits limits;
};

// "<call> on <who>: <strerror(err)>", followed, for ENOSPC on type1 and ENOMEM, by the limit
// that was most likely hit and how to raise it.
error map_error(std::string_view call, std::string_view who, int err, const map_attempt& what);

}  // namespace rig::driver::vfio
