// The function's PCI configuration space (function_model.hpp): type 0 header, MSI-X, PCI Express
// and vendor-specific capabilities; what a driver may write, and the Function Level Reset.
// PCI Local Bus 3.0 (header; MSI-X §6.8.2), PCI Express Base 5.0 §7.5.3 (sim/pci/express.hpp),
// the kernel's mlx5 lib/pci_vsc.c (vsc.hpp).
#include <cstring>

#include "sim/mlx5/function_model.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::mlx5 {

namespace {

void put16(std::byte* p, std::uint16_t v) {
    p[0] = static_cast<std::byte>(v & 0xff);
    p[1] = static_cast<std::byte>(v >> 8);
}
void put32(std::byte* p, std::uint32_t v) {
    put16(p, static_cast<std::uint16_t>(v & 0xffff));
    put16(p + 2, static_cast<std::uint16_t>(v >> 16));
}
std::uint32_t get32(const std::byte* p) {
    return std::to_integer<std::uint32_t>(p[0]) | std::to_integer<std::uint32_t>(p[1]) << 8 |
           std::to_integer<std::uint32_t>(p[2]) << 16 | std::to_integer<std::uint32_t>(p[3]) << 24;
}

// PCI config space offsets (PCI Local Bus 3.0, type 0 header; MSI-X: PCI 3.0 §6.8.2)
constexpr std::size_t cfg_command = 0x04;
constexpr std::size_t cfg_status = 0x06;
constexpr std::size_t cfg_class = 0x08;  // revision, then the class code
constexpr std::size_t cfg_bar0 = 0x10;
constexpr std::size_t cfg_subsystem = 0x2c;
constexpr std::size_t cfg_cap_ptr = 0x34;
constexpr std::uint16_t command_writable = 0x0406;  // memory space, bus master, INTx disable
constexpr std::uint16_t status_cap_list = 0x0010;
constexpr std::uint32_t bar_mem64_prefetchable = 0xc;
constexpr std::uint8_t cap_id_msix = 0x11;
constexpr std::size_t msix_control = msix_cap_offset + 2;  // table size - 1 (10:0), mask (14), enable (15)
constexpr std::uint16_t msix_control_writable = 0xc000;
constexpr std::size_t vsc_regs_begin = vsc_cap_offset + 4;  // ctrl .. data (vsc.hpp)
constexpr std::size_t vsc_regs_end = vsc_cap_offset + vsc_cap_bytes;

bool in_express_cap(std::uint64_t at) {
    return at >= express_cap_offset && at < express_cap_offset + pci::express_cap_bytes;
}

}  // namespace

void function_model::build_config() {
    put16(_config.data(), mellanox_vendor_id);
    put16(_config.data() + 2, _options.device_id);
    put16(_config.data() + cfg_status, status_cap_list);
    put32(_config.data() + cfg_class, 0x02000000);  // Ethernet controller, revision 0
    put32(_config.data() + cfg_bar0, bar_mem64_prefetchable);
    put16(_config.data() + cfg_subsystem, mellanox_vendor_id);
    _config[cfg_cap_ptr] = static_cast<std::byte>(msix_cap_offset);
    // MSI-X -> PCI Express -> vendor-specific, the order a ConnectX lists them in is immaterial
    _config[msix_cap_offset] = static_cast<std::byte>(cap_id_msix);
    _config[msix_cap_offset + 1] = static_cast<std::byte>(express_cap_offset);
    put16(_config.data() + msix_control, static_cast<std::uint16_t>(_options.firmware.msix_vectors - 1));
    put32(_config.data() + msix_cap_offset + 4, static_cast<std::uint32_t>(_layout.msix_table));  // BIR 0
    put32(_config.data() + msix_cap_offset + 8, static_cast<std::uint32_t>(_layout.msix_pba));    // BIR 0
    pci::put_express_cap(_config, express_cap_offset, static_cast<std::uint8_t>(vsc_cap_offset),
                         {.max = _options.link, .current = _options.link, .max_payload = 2, .flr = true});
    _config[vsc_cap_offset] = static_cast<std::byte>(cap_id_vendor);
    _config[vsc_cap_offset + 1] = std::byte{0};  // the last capability
    _config[vsc_cap_offset + 2] = static_cast<std::byte>(vsc_cap_bytes);  // its length (PCI 3.0 §6.7)
}

// The gateway's registers are read as dwords from the gateway (its counter moves on each
// read); the rest of config space is plain storage.
void function_model::config_read(std::uint64_t offset, std::span<std::byte> out) {
    std::memcpy(out.data(), _config.data() + offset, out.size());
    for (std::size_t reg = vsc_regs_begin; reg < vsc_regs_end; reg += 4) {
        if (offset >= reg + 4 || offset + out.size() <= reg) {
            continue;
        }
        std::array<std::byte, 4> v;
        put32(v.data(), _vsc.read(reg - vsc_cap_offset));
        for (std::size_t i = 0; i < 4; ++i) {
            if (reg + i >= offset && reg + i < offset + out.size()) {
                out[reg + i - offset] = v[i];
            }
        }
    }
}

void function_model::config_write(std::uint64_t offset, std::span<const std::byte> in) {
    if (offset >= vsc_regs_begin && offset + in.size() <= vsc_regs_end) {
        // the kernel's pci_vsc.c writes whole dwords (pci_write_config_dword)
        if (offset % 4 == 0 && in.size() == 4) {
            _vsc.write(offset - vsc_cap_offset, get32(in.data()));
        }
        return;
    }
    bool flr = false;
    for (std::size_t i = 0; i < in.size(); ++i) {
        const std::uint64_t at = offset + i;
        if (at == cfg_command || at == cfg_command + 1) {
            const auto mask = static_cast<std::uint8_t>(command_writable >> (8 * (at - cfg_command)));
            _config[at] = in[i] & std::byte{mask};
        } else if (at >= cfg_bar0 && at < cfg_bar0 + 8) {
            _config[at] = in[i];
        } else if (at == msix_control + 1) {
            // MSI-X enable and function mask; the table size bits are read-only
            const auto keep = std::byte{0x3f};
            _config[at] = (_config[at] & keep) | (in[i] & std::byte{msix_control_writable >> 8});
        } else if (in_express_cap(at)) {
            flr = pci::express_cap_write(_config, express_cap_offset, at, in[i]) == pci::express_effect::flr || flr;
        }
    }
    // BAR0: the size's low bits read 0, the type bits read as a 64-bit prefetchable BAR
    const std::uint32_t low = get32(_config.data() + cfg_bar0);
    const auto size_mask = static_cast<std::uint32_t>(~(_options.bar0_size - 1));
    put32(_config.data() + cfg_bar0, (low & size_mask & 0xfffffff0u) | bar_mem64_prefetchable);
    _bar0_base = (std::uint64_t{get32(_config.data() + cfg_bar0 + 4)} << 32) | (low & size_mask & 0xfffffff0u);
    if (flr) {
        // Initiate FLR: the function resets as for VFIO_USER_DEVICE_RESET (PCIe Base §6.6.2);
        // the driver waits 100 ms before it looks again (the kernel's pcie_flr)
        log().info("mlx5: function {}: Function Level Reset", _options.function_index);
        function_reset_locked();
        _wake.notify_one();
        _idle.notify_all();
    }
}

// What a function reset puts back in config space: the command register (memory and bus master
// off), MSI-X disabled; the gateway's semaphore freed. BAR addresses and the link stay.
void function_model::reset_config() {
    _config[cfg_command] = std::byte{0};
    _config[cfg_command + 1] = std::byte{0};
    _config[msix_control + 1] &= std::byte{0x3f};  // MSI-X disabled, unmasked
    _vsc.reset();
}

}  // namespace rig::sim::mlx5
