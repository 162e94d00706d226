#include "driver/vfio/sysfs.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace rig::driver::vfio {

namespace fs = std::filesystem;

bool is_pci_address(std::string_view s) {
    if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') {
        return false;
    }
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (i != 4 && i != 7 && i != 10 && !std::isxdigit(static_cast<unsigned char>(s[i]))) {
            return false;
        }
    }
    return s[11] <= '7' && s[8] <= '1';   // function 0..7, device 0..0x1f
}

std::optional<std::string> read_line(const std::string& path) {
    std::ifstream in(path);
    if (!in) {
        return std::nullopt;
    }
    std::string s;
    std::getline(in, s);
    return s;
}

std::optional<std::uint64_t> read_decimal(const std::string& path) {
    const auto s = read_line(path);
    std::uint64_t v = 0;
    if (!s || std::from_chars(s->data(), s->data() + s->size(), v).ec != std::errc{}) {
        return std::nullopt;
    }
    return v;
}

namespace {

std::optional<std::uint32_t> read_hex(const fs::path& p) {
    auto s = read_line(p);
    if (!s) {
        return std::nullopt;
    }
    std::string_view v = *s;
    if (v.starts_with("0x") || v.starts_with("0X")) {
        v.remove_prefix(2);
    }
    std::uint32_t out = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out, 16);
    if (ec != std::errc{} || end == v.data()) {
        return std::nullopt;
    }
    return out;
}

// The last component of the symlink `p` points to ("mlx5_core", "17"); "" when it is not one.
std::string link_name(const fs::path& p) {
    std::error_code ec;
    const fs::path target = fs::read_symlink(p, ec);
    return ec ? std::string{} : target.filename().string();
}

std::vector<std::string> entries(const fs::path& dir, std::string_view prefix = {}) {
    std::vector<std::string> out;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        std::string name = it->path().filename().string();
        if (name.starts_with(prefix)) {
            out.push_back(std::move(name));
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

result<pci_function> sysfs::function(std::string_view bdf) const {
    if (!is_pci_address(bdf)) {
        return std::unexpected(fail("sysfs", bdf, "not a PCI address (0000:bb:dd.f)", EINVAL));
    }
    const fs::path dir = device_dir(bdf);
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
        return std::unexpected(fail("sysfs", bdf, "no such PCI function (" + dir.string() +
                                                      " does not exist)",
                                    ENODEV));
    }
    pci_function f;
    f.bdf = std::string(bdf);
    const auto vendor = read_hex(dir / "vendor");
    const auto device = read_hex(dir / "device");
    if (!vendor || !device) {
        return std::unexpected(fail("sysfs", bdf, "cannot read vendor/device under " + dir.string(), EIO));
    }
    f.vendor = static_cast<std::uint16_t>(*vendor);
    f.device = static_cast<std::uint16_t>(*device);
    f.class_code = read_hex(dir / "class").value_or(0);
    f.driver = link_name(dir / "driver");
    if (const std::string g = link_name(dir / "iommu_group"); !g.empty()) {
        unsigned n = 0;
        const auto [end, err] = std::from_chars(g.data(), g.data() + g.size(), n);
        if (err == std::errc{} && end == g.data() + g.size()) {
            f.iommu_group = n;
        }
    }
    if (auto o = read_line(dir / "driver_override"); o && *o != "(null)") {
        f.driver_override = *o;
    }
    if (auto cdevs = entries(dir / "vfio-dev", "vfio"); !cdevs.empty()) {
        f.vfio_cdev = cdevs.front();
    }
    f.net_interfaces = entries(dir / "net");
    f.known = abi::pci::find(f.vendor, f.device);
    return f;
}

result<std::vector<pci_function>> sysfs::functions() const {
    std::error_code ec;
    if (!fs::is_directory(devices_dir(), ec)) {
        return std::unexpected(fail("sysfs", devices_dir(), "not a directory", ENOENT));
    }
    std::vector<pci_function> out;
    for (const std::string& name : entries(devices_dir())) {
        if (!is_pci_address(name)) {
            continue;
        }
        auto f = function(name);
        if (!f) {
            return std::unexpected(f.error());
        }
        out.push_back(std::move(*f));
    }
    return out;
}

result<std::vector<pci_function>> sysfs::rig_functions() const {
    auto all = functions();
    if (!all) {
        return all;
    }
    std::erase_if(*all, [](const pci_function& f) { return f.known == nullptr && f.driver != "vfio-pci"; });
    return all;
}

std::vector<std::string> sysfs::group_members(unsigned group) const {
    return entries(fs::path(_root) / "kernel/iommu_groups" / std::to_string(group) / "devices");
}

}  // namespace rig::driver::vfio
