#pragma once
// Watching the firmware's health through the initialization segment (kernel
// device.h struct mlx5_init_seg and health_buffer; kernel health.c check_fatal_sensors /
// poll_health, rdma-core mlx5_vfio_poll_health).
//
//   health_watcher h(fn, {.interval = 100ms});
//   if (auto bad = h.check()) { q.fail(*bad); ... }     // once per h.next_check()
//
// One check reads three places of BAR0 and reports the NIC failed when any of these holds, in
// the kernel's order:
//   - health.fw_ver (0x230) reads 0xffffffff: the function fell off the bus;
//   - nic_interface (bits 10:8 of 0x14) is DISABLED (1) or SW_RESET (7);
//   - health.rfr is set and health.synd is not 0: the firmware asks for recovery;
//   - health_counter (low 24 bits of 0x1010) did not change for `max_misses` checks in a row;
//   - a read fails: the function is gone (the vfio-user connection or the device died).
// The init segment is trapped (docs/architecture.md, "The device model"), so the reads are
// function::region_read calls, made with the function lock held (driver::function is not
// thread-safe).
//
// Threads: one thread calls check(); the result is a value, nothing is logged on success.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "driver/function.hpp"
#include "firmware/mlx5/error.hpp"

namespace rig::firmware::mlx5 {

struct health_options {
    // The kernel polls every 2 s and rdma-core at most every 1 s; a check costs three trapped
    // register reads (a vfio-user round trip each on the model, an MMIO read on a card), so 1 s
    // is cheap and finds a failure sooner. Tests of the model use a few milliseconds.
    std::chrono::milliseconds interval{1000};
    // Checks in a row with an unchanged heartbeat before the firmware counts as stuck
    // (kernel and rdma-core MAX_MISSES).
    unsigned max_misses = 3;
};

// "FW internal error" for health.synd 0x1 (rdma-core's mlx5_vfio.c and the kernel's health.c
// strings).
std::string health_syndrome_name(std::uint8_t synd);

class health_watcher {
public:
    using clock = std::chrono::steady_clock;

    // Reads `fn`'s BAR0 from the caller's thread; driver::function calls are thread-safe.
    explicit health_watcher(driver::function& fn, const health_options& options = {});

    // One poll. nothing: healthy; an error of kind fatal naming the reason otherwise, e.g.
    // "health: FW internal error (synd 0x1), ext_synd 0x1234".
    std::optional<error> check();

    // When the next check is due (interval after the last one).
    clock::time_point next_check() const noexcept { return _last + _options.interval; }
    const health_options& options() const noexcept { return _options; }

private:
    driver::function& _fn;
    health_options _options;
    clock::time_point _last{};
    std::optional<std::uint32_t> _counter;  // heartbeat seen at the previous check
    unsigned _misses = 0;
};

}  // namespace rig::firmware::mlx5
