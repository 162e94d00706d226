#include "driver/vfio/limits.hpp"

#include <sys/resource.h>

#include <string>

#include "driver/vfio/sysfs.hpp"

namespace rig::driver::vfio {

map_limits read_map_limits(std::string_view sysfs_root) {
    map_limits l;
    l.dma_entry_limit =
        read_decimal(std::string(sysfs_root) + "/module/vfio_iommu_type1/parameters/dma_entry_limit");
    rlimit r{};
    if (getrlimit(RLIMIT_MEMLOCK, &r) == 0 && r.rlim_cur != RLIM_INFINITY) {
        l.memlock_bytes = r.rlim_cur;
    }
    return l;
}

error map_error(std::string_view call, std::string_view who, int err, const map_attempt& what) {
    error e = os_error(call, who, err);
    if (err == ENOSPC && what.type1) {
        e.message += ": the container holds as many DMA mappings as vfio_iommu_type1 allows (dma_entry_limit";
        if (what.limits.dma_entry_limit) {
            e.message += " = " + std::to_string(*what.limits.dma_entry_limit);
        }
        e.message += "; this function holds " + std::to_string(what.mappings) +
                     "); raise it with: echo 1048576 > "
                     "/sys/module/vfio_iommu_type1/parameters/dma_entry_limit, or map fewer, "
                     "larger ranges";
    } else if (err == ENOMEM) {
        if (what.limits.memlock_bytes) {
            e.message += ": pinning " + std::to_string(what.bytes) + " more bytes (" +
                         std::to_string(what.mapped_bytes) +
                         " already pinned for this function) passes the locked-memory limit "
                         "RLIMIT_MEMLOCK of " +
                         std::to_string(*what.limits.memlock_bytes) +
                         " bytes, which counts all pinned memory of the " +
                         (what.type1 ? "process" : "user") +
                         "; raise it with ulimit -l unlimited, LimitMEMLOCK=infinity in a "
                         "systemd unit, or memlock in /etc/security/limits.conf (CAP_IPC_LOCK "
                         "lifts it)";
        } else {
            e.message += " (RLIMIT_MEMLOCK is unlimited, so the kernel itself ran short of memory "
                         "to pin " + std::to_string(what.bytes) + " bytes)";
        }
    }
    return e;
}

}  // namespace rig::driver::vfio
