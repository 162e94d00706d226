#pragma once
// The vendor-specific capability (PCI_CAP_ID_VNDR, 0x09) of a ConnectX function: the gateway
// through which a driver reaches the device's internal address spaces from configuration space
// (the kernel's drivers/net/ethernet/mellanox/mlx5/core/lib/pci_vsc.c; registers at the
// capability's offset + VSC_*_OFFSET):
//
//   0x04 ctrl       space 15:0 (written), size valid 28, status 31:29 (0: the space is not
//                   supported; the kernel's mlx5_vsc_gw_set_space then returns -EINVAL)
//   0x08 counter    a new value on every read (the kernel's lock attempt writes it to the
//                   semaphore and reads it back: equal means the lock is taken)
//   0x0c semaphore  0 free; a write while free takes it with the value written, a write of 0
//                   frees it, any other write while it is held is ignored
//   0x10 address    address 29:0, syndrome 30, flag 31: writing an address with flag 0 asks to
//                   read it (the device sets flag 1, data holds the dword, the address moves on
//                   by 4), with flag 1 asks to write data there (the device clears the flag)
//   0x14 data
//
// The model supports no space: a card's crspace (MLX5_VSC_SPACE_SCAN_CRSPACE 7) and semaphore
// domain (0xA) are firmware-internal. Selecting one reads back status 0, as a card answers for a
// space it lacks: the kernel's crdump_enable then masks the error ("space is not supported") and
// leaves crdump off. A gateway access with no space selected completes with the syndrome bit
// set and data 0.
#include <cstddef>
#include <cstdint>

namespace rig::sim::mlx5 {

inline constexpr std::uint8_t cap_id_vendor = 0x09;  // PCI_CAP_ID_VNDR
inline constexpr std::size_t vsc_cap_bytes = 0x18;   // through the data register

class vsc_gateway {
public:
    // A dword read or write at `reg` (0x04 .. 0x14, dword aligned) of the capability.
    std::uint32_t read(std::size_t reg);
    void write(std::size_t reg, std::uint32_t value);
    void reset() { *this = vsc_gateway{}; }

private:
    std::uint32_t _space = 0;
    std::uint32_t _counter = 0;
    std::uint32_t _semaphore = 0;
    std::uint32_t _address = 0;  // address, syndrome and flag as last set
    std::uint32_t _data = 0;
};

}  // namespace rig::sim::mlx5
