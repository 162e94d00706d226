#pragma once
// A fixture sysfs (and /dev, /proc) tree in a temporary directory, laid out as the kernel lays
// out the real one (Documentation/ABI/testing/sysfs-bus-pci):
//   sys/devices/pci0000:00/<bdf>/{vendor,device,class,driver_override}
//   sys/bus/pci/devices/<bdf>              -> ../../../devices/pci0000:00/<bdf>
//   sys/devices/pci0000:00/<bdf>/driver      -> ../../../bus/pci/drivers/<name>
//   sys/devices/pci0000:00/<bdf>/iommu_group -> ../../../kernel/iommu_groups/<N>
//   sys/kernel/iommu_groups/<N>/devices/<bdf> -> ../../../../devices/pci0000:00/<bdf>
//   sys/bus/pci/drivers/<name>/{bind,unbind}, sys/bus/pci/drivers_probe: plain files
// `kernel()` gives a devbind on_write hook that records each write and plays the kernel's part:
// unbind drops the driver link, drivers_probe binds to driver_override.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace rig::test {

namespace fs = std::filesystem;

struct fixture_function {
    std::string bdf;
    std::string vendor;            // "0x15b3"
    std::string device;            // "0x1017"
    std::string pci_class = "0x020000";
    std::string driver;            // "" = none
    std::optional<unsigned> group;
    std::vector<std::string> interfaces;
    std::string cdev;              // "vfio0": vfio-dev/vfio0
};

class sysfs_fixture {
public:
    sysfs_fixture() {
        std::string tmpl = (fs::temp_directory_path() / "rig-sysfs-XXXXXX").string();
        if (mkdtemp(tmpl.data()) == nullptr) {
            throw std::runtime_error("mkdtemp");
        }
        _root = tmpl;
        fs::create_directories(sys() / "bus/pci/devices");
        fs::create_directories(sys() / "bus/pci/drivers");
        fs::create_directories(sys() / "devices/pci0000:00");
        fs::create_directories(sys() / "kernel/iommu_groups");
        fs::create_directories(dev());
        fs::create_directories(proc() / "net");
        put(sys() / "bus/pci/drivers_probe", "");
        put(proc() / "net/route", "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n");
    }
    ~sysfs_fixture() {
        std::error_code ec;
        fs::remove_all(_root, ec);
    }
    sysfs_fixture(const sysfs_fixture&) = delete;
    sysfs_fixture& operator=(const sysfs_fixture&) = delete;

    fs::path root() const { return _root; }
    fs::path sys() const { return _root / "sys"; }
    fs::path dev() const { return _root / "dev"; }
    fs::path proc() const { return _root / "proc"; }
    fs::path state() const { return _root / "state"; }
    fs::path device_dir(const std::string& bdf) const { return sys() / "devices/pci0000:00" / bdf; }

    static void put(const fs::path& p, const std::string& text) {
        fs::create_directories(p.parent_path());
        std::ofstream(p, std::ios::trunc) << text;
    }
    static std::string get(const fs::path& p) {
        std::ifstream in(p);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    }

    void add_driver(const std::string& name) {
        put(sys() / "bus/pci/drivers" / name / "bind", "");
        put(sys() / "bus/pci/drivers" / name / "unbind", "");
    }

    void add_function(const fixture_function& f) {
        const fs::path d = device_dir(f.bdf);
        put(d / "vendor", f.vendor + "\n");
        put(d / "device", f.device + "\n");
        put(d / "class", f.pci_class + "\n");
        put(d / "driver_override", "(null)\n");
        fs::create_directory_symlink("../../../devices/pci0000:00/" + f.bdf, sys() / "bus/pci/devices" / f.bdf);
        if (!f.driver.empty()) {
            add_driver(f.driver);
            set_driver(f.bdf, f.driver);
        }
        if (f.group) {
            const std::string g = std::to_string(*f.group);
            fs::create_directories(sys() / "kernel/iommu_groups" / g / "devices");
            fs::create_directory_symlink("../../../kernel/iommu_groups/" + g, d / "iommu_group");
            fs::create_directory_symlink("../../../../devices/pci0000:00/" + f.bdf,
                                         sys() / "kernel/iommu_groups" / g / "devices" / f.bdf);
        }
        for (const std::string& n : f.interfaces) {
            fs::create_directories(d / "net" / n);
        }
        if (!f.cdev.empty()) {
            fs::create_directories(d / "vfio-dev" / f.cdev);
        }
    }

    void set_driver(const std::string& bdf, const std::string& driver) {
        const fs::path link = device_dir(bdf) / "driver";
        std::error_code ec;
        fs::remove(link, ec);
        if (!driver.empty()) {
            fs::create_directory_symlink("../../../bus/pci/drivers/" + driver, link);
        }
    }
    std::string driver_of(const std::string& bdf) const {
        std::error_code ec;
        const fs::path t = fs::read_symlink(device_dir(bdf) / "driver", ec);
        return ec ? std::string{} : t.filename().string();
    }

    void add_route(const std::string& iface) {
        std::ofstream(proc() / "net/route", std::ios::app)
            << iface << "\t00000000\t0102A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n";
    }

    // Writes seen through the hook, as (path relative to sys/, value).
    std::vector<std::pair<std::string, std::string>> writes;

    // The on_write hook: records, then does what the kernel would.
    auto kernel() {
        return [this](const std::string& path, std::string_view value) {
            const std::string rel = fs::path(path).lexically_relative(sys()).string();
            writes.emplace_back(rel, std::string(value));
            const fs::path p(rel);
            if (p.filename() == "unbind") {
                set_driver(std::string(value), "");
            } else if (rel == "bus/pci/drivers_probe") {
                const std::string bdf(value);
                std::string o = get(device_dir(bdf) / "driver_override");
                while (!o.empty() && o.back() == '\n') {
                    o.pop_back();
                }
                if (!o.empty() && o != "(null)" && fs::is_directory(sys() / "bus/pci/drivers" / o) &&
                    driver_of(bdf).empty()) {
                    set_driver(bdf, o);
                }
            } else if (p.filename() == "driver_override" && value == "\n") {
                put(sys() / p, "(null)\n");   // the kernel shows a cleared override as (null)
            }
        };
    }

private:
    fs::path _root;
};

}  // namespace rig::test
