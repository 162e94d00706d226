#pragma once
// The initialization segment: the registers at the start of BAR0 through which a driver finds
// the firmware's revision, programs the command queue, rings the command doorbell and watches
// the firmware's health (mlx5_ifc.h initial_seg and health_buffer; kernel device.h struct
// mlx5_init_seg, mlx5/core/health.c).
//
// Every register is a big-endian dword; read them with 32-bit MMIO loads, then decode the copy.
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string_view>

#include "abi/mlx5/layout.hpp"

namespace rig::mlx5::ifc {

// mlx5_ifc.h health_buffer, at BAR0 0x200. The first 0x20 bytes (assert_var[] in device.h) and
// 0x228 are reserved here. rfr = recovery flow required; synd != 0 = the firmware failed.
#define RIG_MLX5_HEALTH_BUFFER(F, S)  \
    F(assert_existptr, 0x100, 0x20)   \
    F(assert_callra,   0x120, 0x20)   \
    F(time,            0x160, 0x20)   \
    F(fw_version,      0x180, 0x20)   \
    F(hw_id,           0x1a0, 0x20)   \
    F(rfr,             0x1c0, 0x1)    \
    F(valid,           0x1c4, 0x1)    \
    F(severity,        0x1c5, 0x3)    \
    F(irisc_index,     0x1e0, 0x8)    \
    F(synd,            0x1e8, 0x8)    \
    F(ext_synd,        0x1f0, 0x10)
RIG_MLX5_LAYOUT(health_buffer, 0x200, RIG_MLX5_HEALTH_BUFFER)

// mlx5_ifc.h initial_seg: 0x400c bytes of BAR0. Byte offsets of the registers: fw_rev 0x0,
// cmdif_rev_fw_sub 0x4, cmdq_addr_h 0x10, cmdq_addr_l_sz 0x14, cmd_dbell 0x18, initializing
// 0x1fc, health buffer 0x200, clear_int 0x100c (bit 0), health syndrome/counter 0x1010.
// device.h names registers mlx5_ifc.h leaves reserved (internal_timer_h/l at 0x1000, cmd_exec_to
// at 0xff8, ...): they are not described here.
#define RIG_MLX5_INITIAL_SEG(F, S)                     \
    F(fw_rev_minor,            0x0,    0x10)           \
    F(fw_rev_major,            0x10,   0x10)           \
    F(cmd_interface_rev,       0x20,   0x10)           \
    F(fw_rev_subminor,         0x30,   0x10)           \
    F(cmdq_phy_addr_63_32,     0x80,   0x20)           \
    F(cmdq_phy_addr_31_12,     0xa0,   0x14)           \
    F(nic_interface,           0xb6,   0x2)            \
    F(log_cmdq_size,           0xb8,   0x4)            \
    F(log_cmdq_stride,         0xbc,   0x4)            \
    F(command_doorbell_vector, 0xc0,   0x20)           \
    F(initializing,            0xfe0,  0x1)            \
    F(nic_interface_supported, 0xfe5,  0x3)            \
    F(embedded_cpu,            0xfe8,  0x1)            \
    S(health_buffer,           0x1000, health_buffer)  \
    F(no_dram_nic_offset,      0x1200, 0x20)           \
    F(clear_int,               0x807f, 0x1)            \
    F(health_syndrome,         0x8080, 0x8)            \
    F(health_counter,          0x8088, 0x18)
RIG_MLX5_LAYOUT(initial_seg, 0x20060, RIG_MLX5_INITIAL_SEG)

namespace init_seg {

// The only command-interface revision this driver speaks (kernel cmd.c CMD_IF_REV; rdma-core
// mlx5_vfio.c).
inline constexpr std::uint16_t supported_cmd_interface_rev = 5;

// mlx5_ifc.h MLX5_INITIAL_SEG_NIC_INTERFACE_*. SW_RESET (7) does not fit the 2-bit
// initial_seg.nic_interface: the kernel's own health code (health.c mlx5_get_nic_state,
// rdma-core mlx5_vfio.c) reads three bits, 10:8 of the dword at 0x14, which is
// `nic_interface_state` below.
enum class nic_interface : std::uint8_t {
    full_driver = 0x0,
    disabled = 0x1,
    no_dram_nic = 0x2,
    invalid = 0x3,  // kernel health.c MLX5_NIC_IFC_INVALID (not in mlx5_ifc.h)
    sw_reset = 0x7,
};
inline constexpr ::rig::abi::field nic_interface_state{0xb5, 3};

// mlx5_ifc.h MLX5_INITIAL_SEG_HEALTH_SYNDROME_*: health_buffer.synd.
#define RIG_MLX5_HEALTH_SYNDROMES(X)                                        \
    X(fw_internal_err,             FW_INTERNAL_ERR,             0x01)       \
    X(dead_irisc,                  DEAD_IRISC,                  0x07)       \
    X(hw_fatal_err,                HW_FATAL_ERR,                0x08)       \
    X(fw_crc_err,                  FW_CRC_ERR,                  0x09)       \
    X(icm_fetch_pci_err,           ICM_FETCH_PCI_ERR,           0x0a)       \
    X(icm_page_err,                ICM_PAGE_ERR,                0x0b)       \
    X(asynchronous_eq_buf_overrun, ASYNCHRONOUS_EQ_BUF_OVERRUN, 0x0c)       \
    X(eq_in_err,                   EQ_IN_ERR,                   0x0d)       \
    X(eq_inv,                      EQ_INV,                      0x0e)       \
    X(ffser_err,                   FFSER_ERR,                   0x0f)       \
    X(high_temp_err,               HIGH_TEMP_ERR,               0x10)       \
    X(icm_pci_poisoned_err,        ICM_PCI_POISONED_ERR,        0x12)

enum class health_syndrome : std::uint8_t {
#define RIG_MLX5_HSYND_ENUM(name, kname, value) name = value,
    RIG_MLX5_HEALTH_SYNDROMES(RIG_MLX5_HSYND_ENUM)
#undef RIG_MLX5_HSYND_ENUM
};
inline constexpr health_syndrome all_health_syndromes[] = {
#define RIG_MLX5_HSYND_LIST(name, kname, value) health_syndrome::name,
    RIG_MLX5_HEALTH_SYNDROMES(RIG_MLX5_HSYND_LIST)
#undef RIG_MLX5_HSYND_LIST
};
constexpr std::string_view to_string(health_syndrome s) noexcept {
    switch (s) {
#define RIG_MLX5_HSYND_CASE(name, kname, value) \
    case health_syndrome::name:                 \
        return #kname;
        RIG_MLX5_HEALTH_SYNDROMES(RIG_MLX5_HSYND_CASE)
#undef RIG_MLX5_HSYND_CASE
    }
    return "unknown health syndrome";
}

// What the driver reads at bring-up and while polling health. A short image throws
// std::invalid_argument (the fields read lie up to BAR0 0x1014).
struct state {
    std::uint16_t fw_rev_major;
    std::uint16_t fw_rev_minor;
    std::uint16_t fw_rev_subminor;
    std::uint16_t cmd_interface_rev;
    std::uint8_t log_cmdq_size;    // the queue has 1 << n entries
    std::uint8_t log_cmdq_stride;  // entry i is at i << n
    std::uint8_t nic_interface;    // 3 bits, see nic_interface_state
    bool initializing;             // wait for false before the first command
    std::uint8_t health_syndrome;
    std::uint32_t health_counter;  // heartbeat: must keep changing
};

inline state decode(std::span<const std::byte> bar0) {
    using L = initial_seg;
    return state{
        .fw_rev_major = static_cast<std::uint16_t>(::rig::abi::get(bar0, L::fw_rev_major)),
        .fw_rev_minor = static_cast<std::uint16_t>(::rig::abi::get(bar0, L::fw_rev_minor)),
        .fw_rev_subminor = static_cast<std::uint16_t>(::rig::abi::get(bar0, L::fw_rev_subminor)),
        .cmd_interface_rev = static_cast<std::uint16_t>(::rig::abi::get(bar0, L::cmd_interface_rev)),
        .log_cmdq_size = static_cast<std::uint8_t>(::rig::abi::get(bar0, L::log_cmdq_size)),
        .log_cmdq_stride = static_cast<std::uint8_t>(::rig::abi::get(bar0, L::log_cmdq_stride)),
        .nic_interface = static_cast<std::uint8_t>(::rig::abi::get(bar0, nic_interface_state)),
        .initializing = ::rig::abi::get(bar0, L::initializing) != 0,
        .health_syndrome = static_cast<std::uint8_t>(::rig::abi::get(bar0, L::health_syndrome)),
        .health_counter = static_cast<std::uint32_t>(::rig::abi::get(bar0, L::health_counter)),
    };
}

struct health {
    std::uint32_t assert_existptr;
    std::uint32_t assert_callra;
    std::uint32_t time;
    std::uint32_t fw_version;  // 0xffffffff: the device fell off the bus
    std::uint32_t hw_id;
    bool rfr;
    bool valid;
    std::uint8_t severity;
    std::uint8_t irisc_index;
    std::uint8_t synd;  // 0 = healthy
    std::uint16_t ext_synd;
};

inline health decode_health(std::span<const std::byte> bar0) {
    constexpr auto h = initial_seg::health_buffer;
    using H = health_buffer;
    const auto u32 = [&](::rig::abi::field f) { return static_cast<std::uint32_t>(::rig::abi::get(bar0, h(f))); };
    return health{
        .assert_existptr = u32(H::assert_existptr),
        .assert_callra = u32(H::assert_callra),
        .time = u32(H::time),
        .fw_version = u32(H::fw_version),
        .hw_id = u32(H::hw_id),
        .rfr = u32(H::rfr) != 0,
        .valid = u32(H::valid) != 0,
        .severity = static_cast<std::uint8_t>(u32(H::severity)),
        .irisc_index = static_cast<std::uint8_t>(u32(H::irisc_index)),
        .synd = static_cast<std::uint8_t>(u32(H::synd)),
        .ext_synd = static_cast<std::uint16_t>(u32(H::ext_synd)),
    };
}

// The two dwords that program the command queue's address (written high first, then low):
// host-order values for cmdq_addr_h (0x10) and cmdq_addr_l_sz (0x14). The queue must be
// 4 KiB aligned; the low dword's bits 11:0 are written as zero (nic_interface 0 = full driver).
inline std::uint32_t cmdq_addr_high(std::uint64_t addr) noexcept {
    return static_cast<std::uint32_t>(addr >> 32);
}
inline std::uint32_t cmdq_addr_low(std::uint64_t addr) {
    if ((addr & 0xfff) != 0) {
        throw std::invalid_argument("the command queue address is not 4 KiB aligned");
    }
    return static_cast<std::uint32_t>(addr);
}

}  // namespace init_seg
}  // namespace rig::mlx5::ifc
