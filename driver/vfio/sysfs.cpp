#include "driver/vfio/sysfs.hpp"

#include <algorithm>
#include <array>
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

namespace {

constexpr std::array known_table{
    // mlx5, vendor 0x15b3: rdma-core mlx5_hca_table (reference/mlx5.md §5)
    known_device{mellanox_vendor, 0x1011, "mlx5", "Connect-IB", false},
    known_device{mellanox_vendor, 0x1012, "mlx5", "Connect-IB VF", true},
    known_device{mellanox_vendor, 0x1013, "mlx5", "ConnectX-4", false},
    known_device{mellanox_vendor, 0x1014, "mlx5", "ConnectX-4 VF", true},
    known_device{mellanox_vendor, 0x1015, "mlx5", "ConnectX-4 Lx", false},
    known_device{mellanox_vendor, 0x1016, "mlx5", "ConnectX-4 Lx VF", true},
    known_device{mellanox_vendor, 0x1017, "mlx5", "ConnectX-5", false},
    known_device{mellanox_vendor, 0x1018, "mlx5", "ConnectX-5 VF", true},
    known_device{mellanox_vendor, 0x1019, "mlx5", "ConnectX-5 Ex", false},
    known_device{mellanox_vendor, 0x101a, "mlx5", "ConnectX-5 Ex VF", true},
    known_device{mellanox_vendor, 0x101b, "mlx5", "ConnectX-6", false},
    known_device{mellanox_vendor, 0x101c, "mlx5", "ConnectX-6 VF", true},
    known_device{mellanox_vendor, 0x101d, "mlx5", "ConnectX-6 Dx", false},
    known_device{mellanox_vendor, 0x101e, "mlx5", "ConnectX VF", true},
    known_device{mellanox_vendor, 0x101f, "mlx5", "ConnectX-6 Lx", false},
    known_device{mellanox_vendor, 0x1021, "mlx5", "ConnectX-7", false},
    known_device{mellanox_vendor, 0x1023, "mlx5", "ConnectX-8", false},
    known_device{mellanox_vendor, 0x1025, "mlx5", "ConnectX-9", false},
    known_device{mellanox_vendor, 0x1027, "mlx5", "ConnectX-10", false},
    known_device{mellanox_vendor, 0x2101, "mlx5", "ConnectX-10 NVLink-C2C", false},
    known_device{mellanox_vendor, 0xa2d2, "mlx5", "BlueField", false},
    known_device{mellanox_vendor, 0xa2d3, "mlx5", "BlueField VF", true},
    known_device{mellanox_vendor, 0xa2d6, "mlx5", "BlueField-2", false},
    known_device{mellanox_vendor, 0xa2dc, "mlx5", "BlueField-3", false},
    known_device{mellanox_vendor, 0xa2df, "mlx5", "BlueField-4", false},
    // bnxt Thor, vendor 0x14e4: P5 and P7 (reference/bnxt.md §4)
    known_device{broadcom_vendor, 0x1750, "bnxt", "BCM57508", false},
    known_device{broadcom_vendor, 0x1751, "bnxt", "BCM57504", false},
    known_device{broadcom_vendor, 0x1752, "bnxt", "BCM57502", false},
    known_device{broadcom_vendor, 0x1800, "bnxt", "BCM5750x NPAR", false},
    known_device{broadcom_vendor, 0x1801, "bnxt", "BCM5750x NPAR", false},
    known_device{broadcom_vendor, 0x1802, "bnxt", "BCM5750x NPAR", false},
    known_device{broadcom_vendor, 0x1803, "bnxt", "BCM5750x NPAR", false},
    known_device{broadcom_vendor, 0x1804, "bnxt", "BCM5750x NPAR", false},
    known_device{broadcom_vendor, 0x1805, "bnxt", "BCM5750x NPAR", false},
    known_device{broadcom_vendor, 0x1806, "bnxt", "BCM5750x VF", true},
    known_device{broadcom_vendor, 0x1807, "bnxt", "BCM5750x VF", true},
    known_device{broadcom_vendor, 0x1808, "bnxt", "BCM5750x VF (HV)", true},
    known_device{broadcom_vendor, 0x1809, "bnxt", "BCM5750x VF (HV)", true},
    known_device{broadcom_vendor, 0x1760, "bnxt", "BCM57608", false},
    known_device{broadcom_vendor, 0x1761, "bnxt", "BCM57604", false},
    known_device{broadcom_vendor, 0x1762, "bnxt", "BCM57602", false},
    known_device{broadcom_vendor, 0x1763, "bnxt", "BCM57601", false},
    known_device{broadcom_vendor, 0x1819, "bnxt", "BCM5760x VF", true},
    known_device{broadcom_vendor, 0xd818, "bnxt", "BCM58818", false},
};

// First line of a small sysfs file, without its newline; nullopt when unreadable.
std::optional<std::string> read_line(const fs::path& p) {
    std::ifstream in(p);
    if (!in) {
        return std::nullopt;
    }
    std::string s;
    std::getline(in, s);
    return s;
}

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

std::span<const known_device> known_devices() { return known_table; }

const known_device* find_known(std::uint16_t vendor, std::uint16_t device) {
    for (const known_device& k : known_table) {
        if (k.vendor == vendor && k.device == device) {
            return &k;
        }
    }
    return nullptr;
}

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
    f.known = find_known(f.vendor, f.device);
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
