#pragma once
// Which NIC a function is: its PCI vendor and device IDs from config space (offsets 0x00 and
// 0x02, PCI Local Bus 3.0 §6.2.1), looked up in abi/pci_ids.hpp's list, the one list sysfs
// discovery, rig-devbind and the device model use too. Read before anything else touches the
// function, so that a function of no family Rig drives is refused at once, not after a family's
// bring-up has waited out its deadlines on it.
#include <cstdint>
#include <string>

#include "abi/pci_ids.hpp"
#include "driver/error.hpp"
#include "driver/function.hpp"

namespace rig::driver {

// The entry of the list `f` is. Errors name the function and, for a function Rig does not
// drive, its IDs and the IDs of each family:
//   "vfio-user:/tmp/a.sock: 8086:1572 is not a NIC Rig drives (ConnectX: 15b3:1011-101f, ...; Thor: 14e4:...)"
result<const abi::pci::device_id*> identify(function& f);

// The IDs of one family as `vendor:device, device-device, ...` ("14e4:1750-1752, 1760-1763, ...").
std::string ids_of(abi::pci::family family);

}  // namespace rig::driver
