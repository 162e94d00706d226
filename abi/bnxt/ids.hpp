#pragma once
// PCI identities of Broadcom NetXtreme-E RoCE functions (reference bnxt.md §4). These come from
// the kernel's bnxt.c PCI table and bnxt.h CHIP_NUM_* (not from the HSI headers the tests
// extract), so no golden test pins them; HWRM_VER_GET chip_num equals the PF device id.
#include <cstdint>

namespace rig::bnxt::abi {

inline constexpr std::uint16_t PCI_VENDOR_ID_BROADCOM = 0x14e4;

enum class generation : std::uint8_t { p5, p7 };

struct device_id {
    std::uint16_t device;
    const char* part;
    generation gen;
    bool vf;
};

// P5 "Thor" and P7 "Thor2" functions (P4 and NPAR partitions left out: not driven by Rig).
inline constexpr device_id thor_devices[] = {
    {0x1750, "BCM57508", generation::p5, false},
    {0x1751, "BCM57504", generation::p5, false},
    {0x1752, "BCM57502", generation::p5, false},
    {0x1806, "BCM5750x VF", generation::p5, true},
    {0x1807, "BCM5750x VF", generation::p5, true},
    {0x1760, "BCM57608", generation::p7, false},
    {0x1761, "BCM57604", generation::p7, false},
    {0x1762, "BCM57602", generation::p7, false},
    {0x1763, "BCM57601", generation::p7, false},
    {0xd818, "BCM58818", generation::p7, false},
    {0x1819, "BCM5760x VF", generation::p7, true},
};

// The entry for a device id, or nullptr for a function Rig does not drive.
constexpr const device_id* find_device(std::uint16_t device) noexcept {
    for (const device_id& d : thor_devices) {
        if (d.device == device) {
            return &d;
        }
    }
    return nullptr;
}

// HWRM_VER_GET chip_num values (bnxt.h CHIP_NUM_*): generation tests use chip_num.
inline constexpr std::uint16_t CHIP_NUM_57508 = 0x1750;
inline constexpr std::uint16_t CHIP_NUM_57504 = 0x1751;
inline constexpr std::uint16_t CHIP_NUM_57502 = 0x1752;
inline constexpr std::uint16_t CHIP_NUM_57608 = 0x1760;
inline constexpr std::uint16_t CHIP_NUM_58818 = 0xd818;

}  // namespace rig::bnxt::abi
