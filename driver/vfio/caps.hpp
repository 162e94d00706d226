#pragma once
// VFIO capability chains: the bytes that follow a vfio_region_info or vfio_iommu_type1_info
// when the kernel sets the CAPS flag. Each capability starts with vfio_info_cap_header
// {u16 id, u16 version, u32 next}; `cap_offset` and `next` count from the start of the info
// struct and 0 ends the chain (<linux/vfio.h>, struct vfio_info_cap_header).
//
// These parsers take the raw buffer the ioctl filled, so they are tested on hand-built bytes.
// The buffer comes from the kernel (or, for vfio-user, from another process), so every offset
// is checked: a header outside the buffer, a body running past it, or a chain that loops
// gives an error, never a wild read.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "driver/error.hpp"
#include "driver/function.hpp"
#include "driver/iova.hpp"

namespace rig::driver::vfio {

struct capability {
    std::uint16_t id = 0;
    std::uint16_t version = 0;
    std::size_t offset = 0;   // of its header, from the start of the buffer
};

// The chain that starts at `first` (0: none). Headers must lie at or after `fixed_size` (the
// info struct itself) and inside `buffer`. `call` and `who` name the errors.
result<std::vector<capability>> walk_capabilities(std::span<const std::byte> buffer,
                                                  std::size_t fixed_size, std::uint32_t first,
                                                  std::string_view call, std::string_view who);

// A whole VFIO_DEVICE_GET_REGION_INFO answer (struct vfio_region_info, then its capabilities)
// as a region_info. Mappable areas: none without VFIO_REGION_INFO_FLAG_MMAP; the sparse-mmap
// capability's areas when it is there (each inside the region); else the whole region.
result<region_info> parse_region_info(std::span<const std::byte> buffer, region index,
                                      std::string_view who);

// A whole VFIO_IOMMU_GET_INFO answer (struct vfio_iommu_type1_info, then its capabilities).
struct type1_info {
    std::uint64_t iova_pgsizes = 0;                  // bitmap of IOMMU page sizes
    std::vector<iova_allocator::range> iova_ranges;  // empty: the capability was absent
    bool has_dma_avail = false;
    std::uint32_t dma_avail = 0;                     // DMA mappings the container may still make
};
result<type1_info> parse_type1_info(std::span<const std::byte> buffer, std::string_view who);

}  // namespace rig::driver::vfio
