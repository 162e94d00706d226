#include "driver/vfio/devbind.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

namespace rig::driver::vfio {

namespace fs = std::filesystem;

namespace {

// One write(2) of `value` to a sysfs attribute, as the kernel wants it.
result<void> write_attr(const std::string& path, std::string_view value, const devbind_options& o) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    int err = 0;
    if (fd < 0) {
        err = errno;
    } else {
        const ssize_t n = ::write(fd, value.data(), value.size());
        if (n < 0) {
            err = errno;
        } else if (static_cast<std::size_t>(n) != value.size()) {
            err = EIO;
        }
        ::close(fd);
    }
    if (err != 0) {
        std::string shown(value);
        if (shown == "\n") {
            shown = "\\n";
        }
        return std::unexpected(error{"writing \"" + shown + "\" to " + path + ": " + std::strerror(err), err});
    }
    if (o.on_write) {
        o.on_write(path, value);
    }
    return {};
}

std::string state_file(const devbind_options& o, std::string_view bdf) {
    return o.state_dir + "/" + std::string(bdf);
}

std::string read_record(const devbind_options& o, std::string_view bdf) {
    std::ifstream in(state_file(o, bdf));
    std::string s;
    if (in) {
        std::getline(in, s);
    }
    return s;
}

// Records the driver `f` had before rig-devbind first moved it; a later move keeps the first.
result<void> record_original(const pci_function& f, const devbind_options& o) {
    if (!read_record(o, f.bdf).empty()) {
        return {};
    }
    std::error_code ec;
    fs::create_directories(o.state_dir, ec);
    if (ec) {
        return std::unexpected(error{"creating " + o.state_dir + ": " + ec.message(), ec.value()});
    }
    const std::string path = state_file(o, f.bdf);
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << (f.driver.empty() ? "none" : f.driver) << '\n';
        if (!out.flush()) {
            return std::unexpected(error{"writing " + tmp + ": " + std::strerror(errno), errno});
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        return std::unexpected(error{"renaming " + tmp + ": " + std::strerror(errno), errno});
    }
    return {};
}

// Refuses to take a function off its driver while its interface carries a host route.
result<void> check_routes(const pci_function& f, const devbind_options& o, std::vector<std::string>& notes) {
    auto active = active_route_interfaces(f, o.proc_root);
    if (!active) {
        if (!o.force) {
            return std::unexpected(error{active.error().message + "; use --force to go on without the check",
                                         active.error().os_errno});
        }
        return {};
    }
    if (active->empty()) {
        return {};
    }
    std::string names;
    for (const std::string& n : *active) {
        names += (names.empty() ? "" : ", ") + n;
    }
    if (!o.force) {
        return std::unexpected(error{f.bdf + " carries an active route of this host through " + names + " (" +
                                         o.proc_root + "/net/route): unbinding it would cut the host off that "
                                         "network; use --force to do it anyway",
                                     EBUSY});
    }
    notes.push_back("warning: " + f.bdf + " carried an active route through " + names + " (--force)");
    return {};
}

// Waits up to probe_wait_ms for the function's driver to become `want` ("" = none).
std::string wait_for_driver(const sysfs& sys, std::string_view bdf, std::string_view want, unsigned wait_ms) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    for (;;) {
        auto f = sys.function(bdf);
        const std::string now = f ? f->driver : std::string{};
        if (now == want || std::chrono::steady_clock::now() >= until) {
            return now;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

// driver_override <- driver; unbind; drivers_probe; driver_override cleared; then check.
result<void> move_to(const pci_function& f, std::string_view driver, const sysfs& sys,
                     const devbind_options& o) {
    const std::string dir = sys.device_dir(f.bdf);
    if (auto r = write_attr(dir + "/driver_override", driver, o); !r) {
        return r;
    }
    if (!f.driver.empty()) {
        if (auto r = write_attr(sys.drivers_dir() + "/" + f.driver + "/unbind", f.bdf, o); !r) {
            return r;
        }
    }
    if (auto r = write_attr(sys.drivers_probe(), f.bdf, o); !r) {
        return r;
    }
    // "\n" clears it (the kernel drops the newline and sees an empty name)
    if (auto r = write_attr(dir + "/driver_override", "\n", o); !r) {
        return r;
    }
    const std::string now = wait_for_driver(sys, f.bdf, driver, o.probe_wait_ms);
    if (now != driver) {
        return std::unexpected(error{"drivers_probe did not bind " + f.bdf + " to " + std::string(driver) +
                                         " (its driver is now " + (now.empty() ? "none" : now) +
                                         "); see dmesg",
                                     EIO});
    }
    return {};
}

result<pci_function> find(std::string_view bdf, const sysfs& sys) {
    if (!is_pci_address(bdf)) {
        return std::unexpected(error{"\"" + std::string(bdf) + "\" is not a PCI address (0000:bb:dd.f)", EINVAL});
    }
    auto f = sys.function(bdf);
    if (!f) {
        return std::unexpected(error{std::string(bdf) + ": no such PCI function (" + sys.device_dir(bdf) +
                                         " does not exist)",
                                     ENODEV});
    }
    return f;
}

result<void> driver_loaded(const sysfs& sys, std::string_view driver) {
    std::error_code ec;
    const std::string dir = sys.drivers_dir() + "/" + std::string(driver);
    if (!fs::is_directory(dir, ec)) {
        return std::unexpected(error{"driver " + std::string(driver) + " is not loaded (no " + dir +
                                         "); load it: modprobe " + std::string(driver),
                                     ENOENT});
    }
    return {};
}

}  // namespace

result<std::vector<std::string>> active_route_interfaces(const pci_function& f, std::string_view proc_root) {
    std::vector<std::string> out;
    if (f.net_interfaces.empty()) {
        return out;
    }
    const std::string path = std::string(proc_root) + "/net/route";
    std::ifstream in(path);
    if (!in) {
        return std::unexpected(error{"cannot read " + path + " to see whether " + f.bdf + " carries a route",
                                     ENOENT});
    }
    // "Iface\tDestination\tGateway ..." header, then one route per line, interface first
    std::set<std::string> routed;
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
        std::istringstream words(line);
        std::string iface;
        if (words >> iface) {
            routed.insert(iface);
        }
    }
    for (const std::string& n : f.net_interfaces) {
        if (routed.contains(n)) {
            out.push_back(n);
        }
    }
    return out;
}

result<std::vector<devbind_row>> devbind_status(const devbind_options& options) {
    const sysfs sys(options.sysfs_root);
    auto functions = sys.rig_functions();
    if (!functions) {
        return std::unexpected(functions.error());
    }
    std::vector<devbind_row> rows;
    for (pci_function& f : *functions) {
        devbind_row row;
        row.active_interfaces = active_route_interfaces(f, options.proc_root).value_or(std::vector<std::string>{});
        row.recorded_driver = read_record(options, f.bdf);
        row.function = std::move(f);
        rows.push_back(std::move(row));
    }
    return rows;
}

std::string format_status(const std::vector<devbind_row>& rows) {
    if (rows.empty()) {
        return "no mlx5 or bnxt function found, and none bound to vfio-pci\n";
    }
    std::string out;
    char line[512];
    std::snprintf(line, sizeof line, "%-13s %-5s %-24s %-9s %-14s %-6s %s\n", "function", "kind", "device",
                  "id", "driver", "group", "interfaces");
    out += line;
    for (const devbind_row& r : rows) {
        const pci_function& f = r.function;
        std::string ifaces;
        for (const std::string& n : f.net_interfaces) {
            bool active = false;
            for (const std::string& a : r.active_interfaces) {
                active = active || a == n;
            }
            ifaces += (ifaces.empty() ? "" : " ") + n + (active ? "*" : "");
        }
        std::string driver = f.driver.empty() ? "-" : f.driver;
        if (!r.recorded_driver.empty()) {
            driver += " (was " + r.recorded_driver + ")";
        }
        char id[16];
        std::snprintf(id, sizeof id, "%04x:%04x", f.vendor, f.device);
        const std::string group = f.iommu_group ? std::to_string(*f.iommu_group) : "none";
        std::snprintf(line, sizeof line, "%-13s %-5s %-24s %-9s %-14s %-6s %s\n", f.bdf.c_str(),
                      f.known ? std::string(abi::pci::to_string(f.known->family)).c_str() : "-",
                      f.known ? std::string(f.known->name).c_str() : "-", id, driver.c_str(), group.c_str(),
                      ifaces.empty() ? "-" : ifaces.c_str());
        out += line;
    }
    bool any_active = false;
    for (const devbind_row& r : rows) {
        any_active = any_active || !r.active_interfaces.empty();
    }
    if (any_active) {
        out += "* carries an active route: not unbound without --force\n";
    }
    return out;
}

result<std::vector<std::string>> devbind_bind(std::string_view bdf, std::string_view driver,
                                              const devbind_options& options) {
    const sysfs sys(options.sysfs_root);
    auto f = find(bdf, sys);
    if (!f) {
        return std::unexpected(f.error());
    }
    std::vector<std::string> notes;
    if (f->driver == driver) {
        notes.push_back(f->bdf + " is already bound to " + std::string(driver));
        return notes;
    }
    if (auto r = driver_loaded(sys, driver); !r) {
        return std::unexpected(r.error());
    }
    if (!f->driver.empty()) {
        if (auto r = check_routes(*f, options, notes); !r) {
            return std::unexpected(r.error());
        }
    }
    if (auto r = record_original(*f, options); !r) {
        return std::unexpected(r.error());
    }
    if (auto r = move_to(*f, driver, sys, options); !r) {
        return std::unexpected(r.error());
    }
    notes.push_back(f->bdf + ": " + (f->driver.empty() ? "none" : f->driver) + " -> " + std::string(driver));
    if (!f->iommu_group) {
        notes.push_back("warning: " + f->bdf + " has no IOMMU group: VFIO can use it only in unsafe no-IOMMU mode");
    } else {
        for (const std::string& member : sys.group_members(*f->iommu_group)) {
            auto m = sys.function(member);
            if (member != f->bdf && m && !m->driver.empty() && m->driver != "vfio-pci") {
                notes.push_back("warning: " + member + " shares IOMMU group " + std::to_string(*f->iommu_group) +
                                " and is bound to " + m->driver + ": VFIO cannot use the group until it is "
                                "bound to vfio-pci or unbound");
            }
        }
    }
    return notes;
}

result<std::vector<std::string>> devbind_unbind(std::string_view bdf, const devbind_options& options) {
    const sysfs sys(options.sysfs_root);
    auto f = find(bdf, sys);
    if (!f) {
        return std::unexpected(f.error());
    }
    std::vector<std::string> notes;
    if (f->driver.empty()) {
        notes.push_back(f->bdf + " is bound to no driver");
        return notes;
    }
    if (auto r = check_routes(*f, options, notes); !r) {
        return std::unexpected(r.error());
    }
    if (auto r = record_original(*f, options); !r) {
        return std::unexpected(r.error());
    }
    if (auto r = write_attr(sys.drivers_dir() + "/" + f->driver + "/unbind", f->bdf, options); !r) {
        return std::unexpected(r.error());
    }
    const std::string now = wait_for_driver(sys, f->bdf, "", options.probe_wait_ms);
    if (!now.empty()) {
        return std::unexpected(error{f->bdf + " is still bound to " + now + " after unbind", EIO});
    }
    notes.push_back(f->bdf + ": " + f->driver + " -> none");
    return notes;
}

result<std::vector<std::string>> devbind_restore(std::string_view bdf, const devbind_options& options) {
    const sysfs sys(options.sysfs_root);
    auto f = find(bdf, sys);
    if (!f) {
        return std::unexpected(f.error());
    }
    const std::string original = read_record(options, f->bdf);
    if (original.empty()) {
        return std::unexpected(error{"no record of " + f->bdf + "'s original driver in " + options.state_dir +
                                         " (rig-devbind did not move it)",
                                     ENOENT});
    }
    std::vector<std::string> notes;
    const std::string target = original == "none" ? std::string{} : original;
    if (f->driver == target) {
        notes.push_back(f->bdf + " is already bound to " + original);
    } else if (target.empty()) {
        if (auto r = write_attr(sys.drivers_dir() + "/" + f->driver + "/unbind", f->bdf, options); !r) {
            return std::unexpected(r.error());
        }
        notes.push_back(f->bdf + ": " + f->driver + " -> none");
    } else {
        if (auto r = driver_loaded(sys, target); !r) {
            return std::unexpected(r.error());
        }
        if (!f->driver.empty()) {
            if (auto r = check_routes(*f, options, notes); !r) {
                return std::unexpected(r.error());
            }
        }
        if (auto r = move_to(*f, target, sys, options); !r) {
            return std::unexpected(r.error());
        }
        notes.push_back(f->bdf + ": " + (f->driver.empty() ? "none" : f->driver) + " -> " + target);
    }
    std::error_code ec;
    fs::remove(state_file(options, f->bdf), ec);
    return notes;
}

}  // namespace rig::driver::vfio
