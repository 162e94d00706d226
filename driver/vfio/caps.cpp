#include "driver/vfio/caps.hpp"

#include <linux/vfio.h>

#include <cstring>
#include <string>

#include "abi/bits.hpp"

namespace rig::driver::vfio {

namespace {

template <class T>
T load(std::span<const std::byte> b, std::size_t at) {
    T v;
    std::memcpy(&v, b.data() + at, sizeof v);
    return v;
}

// true when [at, at + bytes) lies inside b (no overflow)
bool inside(std::span<const std::byte> b, std::uint64_t at, std::uint64_t bytes) {
    return at <= b.size() && bytes <= b.size() - at;
}

using ::rig::abi::hex;  // "0x1f" in messages

}  // namespace

result<std::vector<capability>> walk_capabilities(std::span<const std::byte> buffer,
                                                  std::size_t fixed_size, std::uint32_t first,
                                                  std::string_view call, std::string_view who) {
    constexpr std::size_t header = sizeof(vfio_info_cap_header);
    static_assert(header == 8);
    std::vector<capability> caps;
    // Every header takes 8 bytes of the buffer, so a chain with more links than that revisits
    // one: it loops.
    const std::size_t most = buffer.size() / header;
    for (std::uint64_t at = first; at != 0;) {
        if (caps.size() >= most) {
            return std::unexpected(fail(call, who, "capability chain loops (more than " +
                                                       std::to_string(most) + " links in " +
                                                       std::to_string(buffer.size()) + " bytes)",
                                        EPROTO));
        }
        if (at < fixed_size || !inside(buffer, at, header)) {
            return std::unexpected(fail(call, who, "capability at offset " + std::to_string(at) +
                                                       " lies outside the " +
                                                       std::to_string(buffer.size()) +
                                                       "-byte answer",
                                        EPROTO));
        }
        const auto h = load<vfio_info_cap_header>(buffer, static_cast<std::size_t>(at));
        caps.push_back({h.id, h.version, static_cast<std::size_t>(at)});
        at = h.next;
    }
    return caps;
}

result<region_info> parse_region_info(std::span<const std::byte> buffer, region index,
                                      std::string_view who) {
    constexpr std::string_view call = "VFIO_DEVICE_GET_REGION_INFO";
    if (buffer.size() < sizeof(vfio_region_info)) {
        return std::unexpected(fail(call, who, "answer of " + std::to_string(buffer.size()) +
                                                   " bytes is shorter than vfio_region_info",
                                    EPROTO));
    }
    const auto ri = load<vfio_region_info>(buffer, 0);
    region_info info;
    info.index = index;
    info.size = ri.size;
    info.readable = (ri.flags & VFIO_REGION_INFO_FLAG_READ) != 0;
    info.writable = (ri.flags & VFIO_REGION_INFO_FLAG_WRITE) != 0;
    if ((ri.flags & VFIO_REGION_INFO_FLAG_MMAP) == 0 || ri.size == 0) {
        return info;
    }
    if ((ri.flags & VFIO_REGION_INFO_FLAG_CAPS) != 0) {
        auto caps = walk_capabilities(buffer, sizeof(vfio_region_info), ri.cap_offset, call, who);
        if (!caps) {
            return std::unexpected(caps.error());
        }
        for (const capability& c : *caps) {
            if (c.id != VFIO_REGION_INFO_CAP_SPARSE_MMAP) {
                continue;   // TYPE, MSIX_MAPPABLE, ...: nothing we act on
            }
            if (c.version != 1) {
                return std::unexpected(fail(call, who, "sparse-mmap capability version " +
                                                           std::to_string(c.version) +
                                                           " is not the 1 we know",
                                            EPROTO));
            }
            // body: u32 nr_areas, u32 reserved, then nr_areas x {u64 offset, u64 size}
            const std::uint64_t body = c.offset + sizeof(vfio_info_cap_header);
            if (!inside(buffer, body, 8)) {
                return std::unexpected(fail(call, who, "sparse-mmap capability is cut short", EPROTO));
            }
            const auto nr_areas = load<std::uint32_t>(buffer, static_cast<std::size_t>(body));
            const std::uint64_t areas = body + 8;
            if (!inside(buffer, areas, std::uint64_t{nr_areas} * sizeof(vfio_region_sparse_mmap_area))) {
                return std::unexpected(fail(call, who, "sparse-mmap capability claims " +
                                                           std::to_string(nr_areas) +
                                                           " areas; the answer holds fewer",
                                            EPROTO));
            }
            for (std::uint32_t i = 0; i < nr_areas; ++i) {
                const auto a = load<vfio_region_sparse_mmap_area>(
                    buffer, static_cast<std::size_t>(areas + i * sizeof(vfio_region_sparse_mmap_area)));
                if (a.size == 0) {
                    continue;
                }
                if (a.offset > ri.size || a.size > ri.size - a.offset) {
                    return std::unexpected(fail(call, who, "sparse-mmap area at " + hex(a.offset) +
                                                               " of " + hex(a.size) +
                                                               " bytes lies outside the " +
                                                               hex(ri.size) + "-byte region",
                                                EPROTO));
                }
                info.mappable.push_back({a.offset, a.size});
            }
            return info;   // only the listed areas may be mapped, even when there are none
        }
    }
    info.mappable.push_back({0, ri.size});
    return info;
}

result<type1_info> parse_type1_info(std::span<const std::byte> buffer, std::string_view who) {
    constexpr std::string_view call = "VFIO_IOMMU_GET_INFO";
    if (buffer.size() < sizeof(vfio_iommu_type1_info)) {
        return std::unexpected(fail(call, who, "answer of " + std::to_string(buffer.size()) +
                                                   " bytes is shorter than vfio_iommu_type1_info",
                                    EPROTO));
    }
    const auto ti = load<vfio_iommu_type1_info>(buffer, 0);
    type1_info out;
    if ((ti.flags & VFIO_IOMMU_INFO_PGSIZES) != 0) {
        out.iova_pgsizes = ti.iova_pgsizes;
    }
    if ((ti.flags & VFIO_IOMMU_INFO_CAPS) == 0) {
        return out;
    }
    auto caps = walk_capabilities(buffer, sizeof(vfio_iommu_type1_info), ti.cap_offset, call, who);
    if (!caps) {
        return std::unexpected(caps.error());
    }
    for (const capability& c : *caps) {
        const std::uint64_t body = c.offset + sizeof(vfio_info_cap_header);
        if (c.id == VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE) {
            // u32 nr_iovas, u32 reserved, then nr_iovas x {u64 start, u64 end (inclusive)}
            if (!inside(buffer, body, 8)) {
                return std::unexpected(fail(call, who, "IOVA-range capability is cut short", EPROTO));
            }
            const auto n = load<std::uint32_t>(buffer, static_cast<std::size_t>(body));
            if (!inside(buffer, body + 8, std::uint64_t{n} * sizeof(vfio_iova_range))) {
                return std::unexpected(fail(call, who, "IOVA-range capability claims " +
                                                           std::to_string(n) +
                                                           " ranges; the answer holds fewer",
                                            EPROTO));
            }
            for (std::uint32_t i = 0; i < n; ++i) {
                const auto r = load<vfio_iova_range>(
                    buffer, static_cast<std::size_t>(body + 8 + i * sizeof(vfio_iova_range)));
                if (r.start <= r.end) {
                    out.iova_ranges.push_back({r.start, r.end});
                }
            }
        } else if (c.id == VFIO_IOMMU_TYPE1_INFO_DMA_AVAIL) {
            if (!inside(buffer, body, 4)) {
                return std::unexpected(fail(call, who, "DMA-available capability is cut short", EPROTO));
            }
            out.has_dma_avail = true;
            out.dma_avail = load<std::uint32_t>(buffer, static_cast<std::size_t>(body));
        }
    }
    return out;
}

}  // namespace rig::driver::vfio
