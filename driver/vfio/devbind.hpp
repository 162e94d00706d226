#pragma once
// rig-devbind's logic (tools/rig-devbind.cpp is a thin shell over it): which functions Rig can
// drive and who owns them; binding a function to vfio-pci and giving it back, the way
// dpdk-devbind.py and SPDK's setup.sh do (reference/vfio-and-vfio-user.md §3.6):
//   bind:    driver_override <- "vfio-pci"; <old driver>/unbind <- BDF; drivers_probe <- BDF;
//            driver_override <- "\n" (cleared, so a later reprobe picks the native driver).
//   unbind:  <driver>/unbind <- BDF.
//   restore: the same as bind, to the driver recorded when rig-devbind first took the function.
// The original driver is recorded in a small file per function under `state_dir`.
//
// A function whose network interface carries a route of the host (it appears in
// /proc/net/route) is not unbound without `force`: that would cut the host off the network.
#include <functional>
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

}  // namespace rig::driver::vfio
