#pragma once
// The kernel VFIO uapi this back end uses. The legacy container/group part comes from
// <linux/vfio.h> as installed (Debian bookworm: linux-libc-dev 6.1). The iommufd + VFIO device
// cdev part (Linux 6.2 / 6.6) is missing from those headers, so its few structs and ioctl
// numbers are defined here from the kernel's include/uapi/linux/{iommufd,vfio}.h
// (Documentation/userspace-api/iommufd.rst).
//
// Guarding: our definitions live in rig::driver::vfio::uapi under our own names, so a newer
// header that defines the originals cannot clash with them; where it does define them, the
// static_asserts below pin ours to the kernel's.
#include <linux/ioctl.h>
#include <linux/vfio.h>
#include <sys/ioctl.h>

#include <cstddef>
#include <cstdint>

#if __has_include(<linux/iommufd.h>)
#include <linux/iommufd.h>
#endif

namespace rig::driver::vfio::uapi {

// ---- VFIO device cdev (include/uapi/linux/vfio.h, Linux >= 6.6) ----

// VFIO_DEVICE_BIND_IOMMUFD: claims DMA ownership of the device for an iommufd. Until it
// succeeds an opened cdev allows nothing.
struct vfio_device_bind_iommufd {
    std::uint32_t argsz;
    std::uint32_t flags;      // must be 0
    std::int32_t iommufd;
    std::uint32_t out_devid;
};

// VFIO_DEVICE_ATTACH_IOMMUFD_PT: attach to an IOAS (or HWPT) id; the kernel returns the HWPT it
// attached in pt_id. Later kernels append `pasid` (used only with a flag); the kernel copies
// just up to pt_id when no flag is set, so the 6.6 form works on all of them.
struct vfio_device_attach_iommufd_pt {
    std::uint32_t argsz;
    std::uint32_t flags;      // 0
    std::uint32_t pt_id;
};

// VFIO_DEVICE_DETACH_IOMMUFD_PT
struct vfio_device_detach_iommufd_pt {
    std::uint32_t argsz;
    std::uint32_t flags;      // 0
};

inline constexpr unsigned long device_bind_iommufd = _IO(VFIO_TYPE, VFIO_BASE + 18);
inline constexpr unsigned long device_attach_iommufd_pt = _IO(VFIO_TYPE, VFIO_BASE + 19);
inline constexpr unsigned long device_detach_iommufd_pt = _IO(VFIO_TYPE, VFIO_BASE + 20);

// ---- iommufd (include/uapi/linux/iommufd.h, Linux >= 6.2) ----
// Every iommufd ioctl takes a struct whose first u32 is its size; the kernel requires bytes
// it does not know to be zero, so always zero-initialise.

inline constexpr unsigned iommufd_type = ';';   // IOMMUFD_TYPE, the same letter as VFIO's
inline constexpr unsigned iommufd_cmd_base = 0x80;

struct iommu_destroy {
    std::uint32_t size;
    std::uint32_t id;
};

struct iommu_ioas_alloc {
    std::uint32_t size;
    std::uint32_t flags;      // 0
    std::uint32_t out_ioas_id;
};

struct iommu_iova_range {
    std::uint64_t start;
    std::uint64_t last;       // inclusive
};

// Returns -EMSGSIZE with num_iovas set to the count needed when the array is too small.
struct iommu_ioas_iova_ranges {
    std::uint32_t size;
    std::uint32_t ioas_id;
    std::uint32_t num_iovas;
    std::uint32_t reserved;
    std::uint64_t allowed_iovas;        // user pointer to iommu_iova_range[num_iovas]
    std::uint64_t out_iova_alignment;   // IOVA and length must be multiples of it
};

inline constexpr std::uint32_t ioas_map_fixed_iova = 1u << 0;   // IOMMU_IOAS_MAP_FIXED_IOVA
inline constexpr std::uint32_t ioas_map_writeable = 1u << 1;    // device may write memory
inline constexpr std::uint32_t ioas_map_readable = 1u << 2;     // device may read memory

struct iommu_ioas_map {
    std::uint32_t size;
    std::uint32_t flags;
    std::uint32_t ioas_id;
    std::uint32_t reserved;
    std::uint64_t user_va;
    std::uint64_t length;
    std::uint64_t iova;       // in with FIXED_IOVA, else out
};

// iova/length must cover whole earlier maps; 0..U64_MAX unmaps everything.
struct iommu_ioas_unmap {
    std::uint32_t size;
    std::uint32_t ioas_id;
    std::uint64_t iova;
    std::uint64_t length;     // in: bytes to unmap; out: bytes unmapped
};

inline constexpr unsigned long iommu_destroy_ioctl = _IO(iommufd_type, iommufd_cmd_base + 0);
inline constexpr unsigned long iommu_ioas_alloc_ioctl = _IO(iommufd_type, iommufd_cmd_base + 1);
inline constexpr unsigned long iommu_ioas_iova_ranges_ioctl = _IO(iommufd_type, iommufd_cmd_base + 4);
inline constexpr unsigned long iommu_ioas_map_ioctl = _IO(iommufd_type, iommufd_cmd_base + 5);
inline constexpr unsigned long iommu_ioas_unmap_ioctl = _IO(iommufd_type, iommufd_cmd_base + 6);

// Sizes from the kernel's headers (Linux 6.12 include/uapi/linux/{iommufd,vfio}.h).
static_assert(sizeof(vfio_device_bind_iommufd) == 16);
static_assert(sizeof(vfio_device_attach_iommufd_pt) == 12);
static_assert(sizeof(vfio_device_detach_iommufd_pt) == 8);
static_assert(sizeof(iommu_destroy) == 8);
static_assert(sizeof(iommu_ioas_alloc) == 12);
static_assert(sizeof(iommu_iova_range) == 16);
static_assert(sizeof(iommu_ioas_iova_ranges) == 32);
static_assert(sizeof(iommu_ioas_map) == 40);
static_assert(offsetof(iommu_ioas_map, user_va) == 16);
static_assert(sizeof(iommu_ioas_unmap) == 24);
static_assert(offsetof(iommu_ioas_unmap, iova) == 8);

// Where the installed headers have the originals, ours must agree with them.
#ifdef VFIO_DEVICE_BIND_IOMMUFD
static_assert(device_bind_iommufd == VFIO_DEVICE_BIND_IOMMUFD);
static_assert(device_attach_iommufd_pt == VFIO_DEVICE_ATTACH_IOMMUFD_PT);
static_assert(device_detach_iommufd_pt == VFIO_DEVICE_DETACH_IOMMUFD_PT);
static_assert(sizeof(vfio_device_bind_iommufd) == sizeof(::vfio_device_bind_iommufd));
#endif
#ifdef IOMMU_IOAS_MAP
static_assert(iommu_ioas_alloc_ioctl == IOMMU_IOAS_ALLOC);
static_assert(iommu_ioas_iova_ranges_ioctl == IOMMU_IOAS_IOVA_RANGES);
static_assert(iommu_ioas_map_ioctl == IOMMU_IOAS_MAP);
static_assert(iommu_ioas_unmap_ioctl == IOMMU_IOAS_UNMAP);
static_assert(sizeof(iommu_ioas_map) == sizeof(::iommu_ioas_map));
static_assert(sizeof(iommu_ioas_iova_ranges) == sizeof(::iommu_ioas_iova_ranges));
#endif

}  // namespace rig::driver::vfio::uapi
