// The function's PCI configuration space (function_model.hpp): mlx5's choices for the
// family-neutral pieces (sim/pci/config_space.hpp, msix.hpp, express.hpp) -- its IDs, BAR0,
// the capabilities MSI-X, PCI Express and vendor-specific at the offsets below -- and the
// vendor-specific gateway's registers (the kernel's mlx5 lib/pci_vsc.c, vsc.hpp), which this
// file traps before an access reaches the neutral store; the Function Level Reset.
#include "sim/mlx5/function_model.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::mlx5 {

namespace {

void put32(std::byte* p, std::uint32_t v) {
    for (unsigned i = 0; i < 4; ++i) {
        p[i] = static_cast<std::byte>(v >> (8 * i));  // config space is little-endian
    }
}
std::uint32_t get32(const std::byte* p) {
    return std::to_integer<std::uint32_t>(p[0]) | std::to_integer<std::uint32_t>(p[1]) << 8 |
           std::to_integer<std::uint32_t>(p[2]) << 16 | std::to_integer<std::uint32_t>(p[3]) << 24;
}

constexpr std::size_t vsc_regs_begin = vsc_cap_offset + 4;  // ctrl .. data (vsc.hpp)
constexpr std::size_t vsc_regs_end = vsc_cap_offset + vsc_cap_bytes;

}  // namespace

pci::msix_location function_model::msix_of(const function_options& o, const bar0_layout& l) {
    return {.vectors = o.firmware.msix_vectors, .table_bar = 0, .table_offset = l.msix_table, .pba_bar = 0,
            .pba_offset = l.msix_pba};
}

// A ConnectX-6 Dx's face: Ethernet controller, revision 0; BAR0 a 64-bit prefetchable memory
// BAR; MSI-X -> PCI Express -> vendor-specific (the order a ConnectX lists them in is immaterial).
pci::config_space function_model::make_config(const function_options& o, const bar0_layout& l) {
    pci::config_space c({.vendor = mellanox_vendor_id, .device = o.device_id, .class_code = 0x020000});
    c.set_bar(0, {.size = o.bar0_size, .is_64bit = true, .prefetchable = true});
    c.add_msix(msix_cap_offset, msix_of(o, l));
    c.add_express(express_cap_offset, {.max = o.link, .current = o.link, .max_payload = 2, .flr = true});
    c.add_vendor(vsc_cap_offset, vsc_cap_bytes);
    return c;
}

// The gateway's registers are read as dwords from the gateway (its counter moves on each
// read); the rest of config space is the neutral store.
void function_model::config_read(std::uint64_t offset, std::span<std::byte> out) {
    _config.read(offset, out);
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
    if (_config.write(offset, in).flr) {
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
    _config.reset();
    _vsc.reset();
}

}  // namespace rig::sim::mlx5
