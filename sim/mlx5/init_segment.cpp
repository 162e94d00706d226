// The function's PCI face: config space, BAR0 and the initialization segment (function_model.hpp).
#include <algorithm>
#include <bit>
#include <cstring>

#include "sim/mlx5/function_model.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::mlx5 {

namespace ifc = rig::mlx5::ifc;
namespace vu = rig::sim::vfio_user;
using iseg = ifc::initial_seg;

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

// PCI config space offsets (PCI Local Bus 3.0, type 0 header)
constexpr std::size_t cfg_command = 0x04;
constexpr std::size_t cfg_class = 0x08;  // revision, then the class code
constexpr std::size_t cfg_bar0 = 0x10;
constexpr std::size_t cfg_subsystem = 0x2c;
constexpr std::uint16_t command_writable = 0x0406;  // memory space, bus master, INTx disable
constexpr std::uint32_t bar_mem64_prefetchable = 0xc;

// The byte offset of the dword that holds register field f, and f inside that dword.
constexpr std::uint64_t dword_of(abi::field f) { return f.off / 32 * 4; }
constexpr abi::field in_dword(abi::field f) { return {f.off % 32, f.bits}; }

}  // namespace

function_model::function_model(function_options options) : _options(options) {
    if (!std::has_single_bit(_options.bar0_size) || _options.bar0_size < 0x10000) {
        throw std::invalid_argument("mlx5 function model: BAR0 size must be a power of two >= 64 KiB");
    }
    if (_options.log_cmdq_size > 5 || _options.log_cmdq_stride < 6 ||
        _options.log_cmdq_size + _options.log_cmdq_stride > 12) {
        throw std::invalid_argument("mlx5 function model: the command queue must fit one 4 KiB page");
    }
    put16(_config.data(), mellanox_vendor_id);
    put16(_config.data() + 2, _options.device_id);
    put32(_config.data() + cfg_class, 0x02000000);  // Ethernet controller, revision 0
    put32(_config.data() + cfg_bar0, bar_mem64_prefetchable);
    put16(_config.data() + cfg_subsystem, mellanox_vendor_id);
    reset_locked();
}

void function_model::attach(vu::server& s) {
    std::lock_guard g(_lock);
    _server = &s;
}

vu::region_desc function_model::region(unsigned index) {
    vu::region_desc d;
    if (index == vu::config_region) {
        d.size = _config.size();
        d.readable = d.writable = true;
    } else if (index == 0) {
        d.size = _options.bar0_size;
        d.readable = d.writable = true;  // all trapped for now
    }
    return d;
}

std::uint32_t function_model::irq_count(vu::irq kind) {
    return kind == vu::irq::intx ? 1 : 0;
}

bool function_model::initializing() const {
    return std::chrono::steady_clock::now() < _ready_at;
}

void function_model::refresh_iseg() {
    abi::set<iseg::initializing>(_iseg, initializing() ? 1 : 0);
    abi::set<iseg::health_counter>(_iseg, _health_counter & 0xffffff);
}

bool function_model::read(unsigned region, std::uint64_t offset, std::span<std::byte> out) {
    std::lock_guard g(_lock);
    if (region == vu::config_region) {
        std::memcpy(out.data(), _config.data() + offset, out.size());
        return true;
    }
    if (region != 0) {
        return false;
    }
    std::fill(out.begin(), out.end(), std::byte{0});
    if (offset >= iseg_bytes) {
        return true;
    }
    const std::uint64_t counter_at = dword_of(iseg::health_counter);
    if (offset < counter_at + 4 && counter_at < offset + out.size()) {
        ++_health_counter;  // the heartbeat moves on every look
    }
    refresh_iseg();
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(out.size(), iseg_bytes - offset));
    std::memcpy(out.data(), _iseg.data() + offset, n);
    return true;
}

bool function_model::write(unsigned region, std::uint64_t offset, std::span<const std::byte> in) {
    std::lock_guard g(_lock);
    if (region == vu::config_region) {
        config_write(offset, in);
        return true;
    }
    if (region != 0) {
        return false;
    }
    if (offset >= iseg_bytes) {
        return true;  // UAR pages and beyond: nothing yet
    }
    if (offset % 4 != 0 || in.size() % 4 != 0) {
        log().warn("mlx5: {}-byte write at BAR0 {:#x} ignored: registers are written as dwords", in.size(), offset);
        return true;
    }
    for (std::size_t i = 0; i < in.size() && offset + i + 4 <= iseg_bytes; i += 4) {
        write_iseg_dword(offset + i, abi::load_be<std::uint32_t>(in.data() + i));
    }
    return true;
}

void function_model::write_iseg_dword(std::uint64_t offset, std::uint32_t host_value) {
    std::array<std::byte, 4> w;
    abi::store_be<std::uint32_t>(w.data(), host_value);
    if (offset == dword_of(iseg::cmdq_phy_addr_63_32)) {
        abi::set<iseg::cmdq_phy_addr_63_32>(_iseg, abi::get(w, in_dword(iseg::cmdq_phy_addr_63_32)));
    } else if (offset == dword_of(iseg::cmdq_phy_addr_31_12)) {
        // log_cmdq_size/stride are read-only; nic_interface writes (fast teardown) are not modelled
        abi::set<iseg::cmdq_phy_addr_31_12>(_iseg, abi::get(w, in_dword(iseg::cmdq_phy_addr_31_12)));
    } else if (offset == dword_of(iseg::command_doorbell_vector)) {
        ring(static_cast<std::uint32_t>(abi::get(w, in_dword(iseg::command_doorbell_vector))));
    } else {
        log().debug("mlx5: write of {:#x} to BAR0 {:#x} ignored (read-only or reserved)", host_value, offset);
    }
}

void function_model::config_write(std::uint64_t offset, std::span<const std::byte> in) {
    for (std::size_t i = 0; i < in.size(); ++i) {
        const std::uint64_t at = offset + i;
        if (at == cfg_command || at == cfg_command + 1) {
            const auto mask = static_cast<std::uint8_t>(command_writable >> (8 * (at - cfg_command)));
            _config[at] = in[i] & std::byte{mask};
        } else if (at >= cfg_bar0 && at < cfg_bar0 + 8) {
            _config[at] = in[i];
        }
    }
    // BAR0: the size's low bits read 0, the type bits read as a 64-bit prefetchable BAR
    const std::uint32_t low = get32(_config.data() + cfg_bar0);
    const auto size_mask = static_cast<std::uint32_t>(~(_options.bar0_size - 1));
    put32(_config.data() + cfg_bar0, (low & size_mask & 0xfffffff0u) | bar_mem64_prefetchable);
    _bar0_base = (std::uint64_t{get32(_config.data() + cfg_bar0 + 4)} << 32) | (low & size_mask & 0xfffffff0u);
}

void function_model::reset() {
    std::lock_guard g(_lock);
    reset_locked();
    _config[cfg_command] = std::byte{0};
    _config[cfg_command + 1] = std::byte{0};
}

void function_model::reset_locked() {
    _fw = firmware(_options.firmware);
    _iseg.fill(std::byte{0});
    abi::set<iseg::fw_rev_major>(_iseg, _options.fw_rev_major);
    abi::set<iseg::fw_rev_minor>(_iseg, _options.fw_rev_minor);
    abi::set<iseg::fw_rev_subminor>(_iseg, _options.fw_rev_subminor);
    abi::set<iseg::cmd_interface_rev>(_iseg, ifc::init_seg::supported_cmd_interface_rev);
    abi::set<iseg::log_cmdq_size>(_iseg, _options.log_cmdq_size);
    abi::set<iseg::log_cmdq_stride>(_iseg, _options.log_cmdq_stride);
    _ready_at = std::chrono::steady_clock::now() + _options.init_time;
    _last = {};
    refresh_iseg();
}

hca_state function_model::state() const {
    std::lock_guard g(_lock);
    return _fw.state();
}
std::uint16_t function_model::issi() const {
    std::lock_guard g(_lock);
    return _fw.issi();
}
std::size_t function_model::pages_owned() const {
    std::lock_guard g(_lock);
    return _fw.pages_owned();
}
std::uint64_t function_model::cmdq_address() const {
    std::lock_guard g(_lock);
    return abi::get<iseg::cmdq_phy_addr_63_32>(_iseg) << 32 | abi::get<iseg::cmdq_phy_addr_31_12>(_iseg) << 12;
}
std::uint64_t function_model::doorbells_ignored() const {
    std::lock_guard g(_lock);
    return _doorbells_ignored;
}
completion function_model::last_completion(unsigned slot) const {
    std::lock_guard g(_lock);
    return slot < _last.size() ? _last[slot] : completion{};
}

}  // namespace rig::sim::mlx5
