#include <cctype>

#include "driver/backends.hpp"

namespace rig::driver {

namespace {
// "0000:bb:dd.f": domain, bus, device, function in hexadecimal
bool is_pci_address(std::string_view s) {
    if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') {
        return false;
    }
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (i == 4 || i == 7 || i == 10) {
            continue;
        }
        if (!std::isxdigit(static_cast<unsigned char>(s[i]))) {
            return false;
        }
    }
    return s[11] <= '7' && s[8] <= '1';   // function 0..7, device 0..0x1f
}
}  // namespace

result<std::unique_ptr<function>> open(std::string_view where, const open_options& options) {
    constexpr std::string_view vfio_user = "vfio-user:";
    if (where.starts_with(vfio_user)) {
        const std::string_view path = where.substr(vfio_user.size());
        if (path.empty()) {
            return std::unexpected(fail("open", where, "no socket path after \"vfio-user:\""));
        }
        return open_vfio_user(path, options);
    }
    if (is_pci_address(where)) {
        return open_kernel_vfio(where, options);
    }
    return std::unexpected(fail("open", where,
                                "not a PCI address (0000:bb:dd.f) or vfio-user:PATH", EINVAL));
}

}  // namespace rig::driver
