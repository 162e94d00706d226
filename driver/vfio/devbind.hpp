#pragma once
// rig-devbind's logic (tools/rig-devbind.cpp is a thin shell over it): which functions Rig can
// drive and who owns them; binding a function to vfio-pci and giving it back, the way
// dpdk-devbind.py and SPDK's scripts/setup.sh do (the kernel's Documentation/ABI/testing/
// sysfs-bus-pci: driver_override, drivers_probe):
//   bind:    driver_override <- "vfio-pci"; <old driver>/unbind <- BDF; drivers_probe <- BDF;
//            driver_override <- "\n" (cleared, so a later reprobe picks the native driver).
//   unbind:  <driver>/unbind <- BDF.
//   restore: the same as bind, to the driver recorded when rig-devbind first took the function.
// The original driver is recorded in a small file per function under `state_dir`.
//
// A function whose network interface carries a route of the host (it appears in
// /proc/net/route) is not unbound without `force`: that would cut the host off the network.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "driver/error.hpp"
#include "driver/vfio/sysfs.hpp"

namespace rig::driver::vfio {

struct devbind_options {
    std::string sysfs_root = "/sys";
    std::string proc_root = "/proc";
    std::string state_dir = "/run/rig/devbind";
    std::string dev_root = "/dev";     // --check: the device nodes
    std::string etc_root = "/etc";     // --check: group and passwd, for names
    bool force = false;                // unbind even a function that carries a route
    unsigned probe_wait_ms = 1000;     // how long to wait for a driver change to show in sysfs
    // Called after each sysfs write with the path and the bytes written. Tests use it to
    // record the order and to play the kernel's part on a fixture tree.
    std::function<void(const std::string& path, std::string_view value)> on_write;
};

struct devbind_row {
    pci_function function;
    std::vector<std::string> active_interfaces;   // its interfaces that carry a route
    std::string recorded_driver;                  // what --restore gives it back to; "" if none
};

// Rig-capable functions (mlx5, bnxt) and any function bound to vfio-pci, in address order.
result<std::vector<devbind_row>> devbind_status(const devbind_options& options);
std::string format_status(const std::vector<devbind_row>& rows);

// Each returns what it did (and any warning) as lines for the user.
result<std::vector<std::string>> devbind_bind(std::string_view bdf, std::string_view driver,
                                              const devbind_options& options);
result<std::vector<std::string>> devbind_unbind(std::string_view bdf, const devbind_options& options);
result<std::vector<std::string>> devbind_restore(std::string_view bdf, const devbind_options& options);

// The function's interfaces (<sysfs>/.../net/*) that appear in <proc_root>/net/route.
result<std::vector<std::string>> active_route_interfaces(const pci_function& f,
                                                         std::string_view proc_root);

// ---- --check: what the calling user still needs to open a function (devbind_check.cpp) --------

// Who asks: the identity the kernel checks a device node's mode against, and the limit it
// charges pinned memory to. Tests build one; caller_of_this_process reads this process's.
struct caller {
    unsigned uid = 0;
    unsigned gid = 0;
    std::vector<unsigned> groups;                 // supplementary groups of the process
    std::optional<std::uint64_t> memlock_bytes;   // soft RLIMIT_MEMLOCK; nullopt: unlimited
    bool ipc_lock = false;                        // CAP_IPC_LOCK in effect: pinning is not limited
};
// getuid, getgid, getgroups; RLIMIT_MEMLOCK through read_map_limits (limits.hpp); CapEff from
// <proc_root>/self/status.
caller caller_of_this_process(const devbind_options& options);

// The group Rig's udev rule gives the device nodes to (packaging/udev/70-rig-vfio.rules).
inline constexpr std::string_view rig_group = "rig";
// Below this RLIMIT_MEMLOCK a NIC does not come up: what the driver pins before the application
// registers anything (devbind_check.cpp says what it is made of).
inline constexpr std::uint64_t memlock_floor = std::uint64_t{256} << 20;

enum class verdict : std::uint8_t { ok, note, missing };

struct finding {
    verdict level = verdict::ok;
    std::string subject;   // "memlock", "driver", "/dev/vfio/17"
    std::string text;      // what is so
    std::string fix;       // what to do; "" when nothing
};

struct function_check {
    std::string title;     // "0000:3b:00.0 mlx5 ConnectX-5 (15b3:1017)"
    std::vector<finding> findings;
};

struct check_report {
    std::vector<finding> host;                 // memlock, hugepages, vfio-pci, iommufd, group rig
    std::vector<function_check> functions;
    bool usable() const;                       // nothing missing
};

// The host's findings and each function's (every Rig function when `bdfs` is empty). Errors:
// a bad address, a function that does not exist, a sysfs that cannot be read.
result<check_report> devbind_check(std::span<const std::string> bdfs, const caller& who,
                                   const devbind_options& options);
// One line a finding: "  MISSING driver: bound to mlx5_core, not vfio-pci; fix: ...".
std::string format_check(const check_report& report);

}  // namespace rig::driver::vfio
