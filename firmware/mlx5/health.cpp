#include "firmware/mlx5/health.hpp"

#include <array>
#include <span>
#include <vector>

#include "abi/bits.hpp"
#include "abi/mlx5/ifc/init_seg.hpp"

namespace rig::firmware::mlx5 {

namespace {

namespace iseg = ::rig::mlx5::ifc::init_seg;
using initial_seg = ::rig::mlx5::ifc::initial_seg;

// What one check reads, at its BAR0 offsets (kernel device.h struct mlx5_init_seg, struct
// health_buffer): the dword holding nic_interface, the 64-byte health buffer, the heartbeat dword.
// The copy ends with the heartbeat.
constexpr std::uint64_t nic_interface_dword = 0x14;
constexpr std::uint64_t health_buffer_at = initial_seg::health_buffer.off / 8;
constexpr std::size_t health_buffer_bytes = ::rig::mlx5::ifc::health_buffer::size_bytes;
constexpr std::uint64_t health_counter_dword = initial_seg::health_counter.off / 32 * 4;
constexpr std::size_t image_bytes = health_counter_dword + 4;
static_assert(health_buffer_at == 0x200 && health_buffer_bytes == 0x40 && health_counter_dword == 0x1010);

error fatal(std::string message) {
    return plain_error(error_kind::fatal, "health: " + std::move(message));
}

}  // namespace

std::string health_syndrome_name(std::uint8_t synd) {
    using s = iseg::health_syndrome;
    switch (static_cast<s>(synd)) {
    case s::fw_internal_err: return "FW internal error";
    case s::dead_irisc: return "irisc not responding";
    case s::hw_fatal_err: return "HW unrecoverable error";
    case s::fw_crc_err: return "FW CRC error";
    case s::icm_fetch_pci_err: return "ICM fetch PCI error";
    case s::icm_page_err: return "HW fatal error";
    case s::asynchronous_eq_buf_overrun: return "async EQ buffer overrun";
    case s::eq_in_err: return "EQ error";
    case s::eq_inv: return "invalid EQ referenced";
    case s::ffser_err: return "FFSER error";
    case s::high_temp_err: return "high temperature";
    case s::icm_pci_poisoned_err: return "ICM fetch PCI data poisoned error";
    }
    return "unrecognized error";
}

health_watcher::health_watcher(driver::function& fn, const health_options& options)
    : _fn(fn), _options(options), _last(clock::now()) {}

std::optional<error> health_watcher::check() {
    _last = clock::now();
    std::vector<std::byte> image(image_bytes);
    const auto read = [&](std::uint64_t offset, std::size_t bytes) -> std::optional<error> {
        std::span<std::byte> to(image.data() + offset, bytes);
        if (auto r = _fn.region_read(driver::region::bar0, offset, to); !r) {
            return fatal("the function does not answer (" + r.error().message + ")");
        }
        return std::nullopt;
    };
    if (auto e = read(health_buffer_at, health_buffer_bytes)) {
        return e;
    }
    if (auto e = read(nic_interface_dword, 4)) {
        return e;
    }
    if (auto e = read(health_counter_dword, 4)) {
        return e;
    }
    const std::span<const std::byte> bar0(image);
    const auto h = iseg::decode_health(bar0);

    // Kernel health.c check_fatal_sensors: a dead link first (every register reads all ones),
    // then the interface state, then the firmware's own syndrome.
    if (h.fw_version == 0xffffffffu) {
        return fatal("the function is gone (health.fw_ver reads 0xffffffff)");
    }
    const auto nic = static_cast<iseg::nic_interface>(abi::get(bar0, iseg::nic_interface_state));
    if (nic == iseg::nic_interface::disabled || nic == iseg::nic_interface::sw_reset) {
        return fatal(std::string("NIC interface ") + (nic == iseg::nic_interface::disabled ? "DISABLED" : "SW_RESET") +
                     " (" + abi::hex(static_cast<std::uint8_t>(nic)) + ")");
    }
    if (h.rfr && h.synd != 0) {
        return fatal(health_syndrome_name(h.synd) + " (synd " + abi::hex(h.synd) + "), ext_synd " +
                     abi::hex(h.ext_synd) + ", severity " + std::to_string(h.severity) + ", fw_ver " +
                     abi::hex(h.fw_version) + ", hw_id " + abi::hex(h.hw_id) + ", irisc " +
                     std::to_string(h.irisc_index));
    }

    // Heartbeat: the firmware keeps health_counter moving; unchanged for max_misses checks in a
    // row means it is stuck (kernel poll_health, MAX_MISSES).
    const auto counter = static_cast<std::uint32_t>(abi::get(bar0, initial_seg::health_counter));
    if (_counter && *_counter == counter) {
        ++_misses;
        if (_misses >= _options.max_misses) {
            return fatal("firmware heartbeat stopped (health_counter " + abi::hex(counter) + " unchanged for " +
                         std::to_string(_misses) + " checks)");
        }
    } else {
        _misses = 0;
    }
    _counter = counter;
    return std::nullopt;
}

}  // namespace rig::firmware::mlx5
