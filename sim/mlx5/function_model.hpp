#pragma once
// A ConnectX function, as a vfio-user device: PCI identity, BAR0 with the initialization
// segment, and the command-queue engine in front of the firmware (reference mlx5.md §2, §5,
// §7.2; DESIGN.md §4).
//
//   sim::mlx5::function_model fn;
//   auto srv = sim::vfio_user::server::create(path, fn).value();
//   fn.attach(*srv);
//   srv->start();
//
// Config space: vendor 0x15b3, device `options.device_id` (ConnectX-6 Dx by default), class
// 0x020000, BAR0 a 64-bit prefetchable memory BAR of options.bar0_size bytes; the command
// register and BAR0 (sizing included) are writable. No capabilities yet (no MSI-X).
//
// BAR0: all of it is trapped. The initialization segment (ifc::initial_seg, its first 0x400c
// bytes) answers as §2.1 says; the rest reads 0 and ignores writes (UAR pages: later).
//  - initializing (0x1fc bit 31) reads 1 for options.init_time after construction or reset;
//  - health_counter (0x1010) advances on every read of it; the health buffer is all 0;
//  - cmdq_addr_h / cmdq_addr_l_sz take the queue's address (the RO geometry and
//    nic_interface bits of 0x14 ignore writes);
//  - a write of 1 << slot to the doorbell (0x18, big-endian) runs entry `slot`, synchronously,
//    inside the write: the entry is complete (ownership 0) when the client's write returns.
//    Doorbells rung while initializing are ignored.
//
// Thread-safe: the server's thread and a test's thread may both call in.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "abi/mlx5/ifc/cmdq.hpp"
#include "abi/mlx5/ifc/init_seg.hpp"
#include "sim/mlx5/firmware.hpp"
#include "sim/vfio_user/device.hpp"
#include "sim/vfio_user/server.hpp"

namespace rig::sim::mlx5 {

inline constexpr std::uint16_t mellanox_vendor_id = 0x15b3;
inline constexpr std::uint16_t connectx6dx_device_id = 0x101d;

struct function_options {
    std::uint16_t device_id = connectx6dx_device_id;
    std::uint64_t bar0_size = 32u << 20;  // a power of two, at least 64 KiB
    std::chrono::milliseconds init_time{20};
    std::uint16_t fw_rev_major = 22;
    std::uint16_t fw_rev_minor = 39;
    std::uint16_t fw_rev_subminor = 1002;
    std::uint8_t log_cmdq_size = 5;    // 32 entries
    std::uint8_t log_cmdq_stride = 6;  // 64 bytes apart
    firmware_options firmware;
};

// What the command engine did with the last doorbell of a slot (for tests and logs).
struct completion {
    bool ran = false;  // false: ignored (not owned by the device, or initializing)
    rig::mlx5::ifc::delivery_status delivery = rig::mlx5::ifc::delivery_status::ok;
};

class function_model final : public vfio_user::device {
public:
    explicit function_model(function_options options = {});

    // The server whose DMA space the model uses (before the server starts).
    void attach(vfio_user::server& s);

    vfio_user::region_desc region(unsigned index) override;
    std::uint32_t irq_count(vfio_user::irq kind) override;
    bool read(unsigned region, std::uint64_t offset, std::span<std::byte> out) override;
    bool write(unsigned region, std::uint64_t offset, std::span<const std::byte> in) override;
    void reset() override;

    // ---- inspection ----
    hca_state state() const;
    std::uint16_t issi() const;
    std::size_t pages_owned() const;
    std::uint64_t cmdq_address() const;
    std::uint64_t doorbells_ignored() const;
    completion last_completion(unsigned slot) const;

private:
    static constexpr std::size_t iseg_bytes = rig::mlx5::ifc::initial_seg::size_bytes;

    // init_segment.cpp, with _lock held
    bool initializing() const;
    void refresh_iseg();
    void write_iseg_dword(std::uint64_t offset, std::uint32_t host_value);
    void config_write(std::uint64_t offset, std::span<const std::byte> in);
    void reset_locked();

    // cmdq.cpp, with _lock held
    void ring(std::uint32_t vector);
    completion run_slot(unsigned slot);

    const function_options _options;
    mutable std::mutex _lock;
    vfio_user::server* _server = nullptr;
    firmware _fw;
    std::array<std::byte, 4096> _config{};
    std::uint64_t _bar0_base = 0;  // what the driver wrote to the BAR (sizing)
    std::array<std::byte, iseg_bytes> _iseg{};
    std::chrono::steady_clock::time_point _ready_at;
    std::uint32_t _health_counter = 0;
    std::uint64_t _doorbells_ignored = 0;
    std::array<completion, rig::mlx5::ifc::cmdq::max_commands> _last{};
};

}  // namespace rig::sim::mlx5
