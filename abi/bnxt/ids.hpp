#pragma once
// Chip numbers of Broadcom NetXtreme-E Thor parts (bnxt_en's bnxt.h CHIP_NUM_*). HWRM_VER_GET
// chip_num equals the PF's PCI device id for these parts; the PCI IDs themselves, PFs and VFs, are
// in the one list of abi/pci_ids.hpp. The generation is a property of the chip number, not of the
// PCI ID (a VF reports its PF's chip): bnxt.h BNXT_CHIP_P5 / BNXT_CHIP_P7, and bnxt_re's
// qplib_res.h _is_chip_gen_p5 / _is_chip_p7.
#include <cstdint>
#include <optional>

#include "abi/pci_ids.hpp"

namespace rig::bnxt::abi {

inline constexpr std::uint16_t PCI_VENDOR_ID_BROADCOM = ::rig::abi::pci::vendor_broadcom;

enum class generation : std::uint8_t { p5, p7 };

// HWRM_VER_GET chip_num values (bnxt.h CHIP_NUM_*; 58818 from Broadcom's out-of-tree bnxt.h).
inline constexpr std::uint16_t CHIP_NUM_57508 = 0x1750;
inline constexpr std::uint16_t CHIP_NUM_57504 = 0x1751;
inline constexpr std::uint16_t CHIP_NUM_57502 = 0x1752;
inline constexpr std::uint16_t CHIP_NUM_57608 = 0x1760;
inline constexpr std::uint16_t CHIP_NUM_58818 = 0xd818;

// P5 or P7 for a Thor chip number; nothing for an older chip (P4 and before: not driven by Rig).
constexpr std::optional<generation> generation_of(std::uint16_t chip_num) noexcept {
    switch (chip_num) {
    case CHIP_NUM_57508:
    case CHIP_NUM_57504:
    case CHIP_NUM_57502:
        return generation::p5;
    case CHIP_NUM_57608:
    case CHIP_NUM_58818:
        return generation::p7;
    default:
        return std::nullopt;
    }
}

}  // namespace rig::bnxt::abi
