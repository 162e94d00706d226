#pragma once
// One report per family: bring the function up with that family's firmware layer, print what
// it is, tear it down. Each returns rig-info's exit status (0, or 1 after one line on stderr).
#include <string>

#include "abi/pci_ids.hpp"
#include "driver/function.hpp"

namespace rig::info {

struct request {
    std::string device;     // as given: 0000:3b:00.0 or vfio-user:PATH
    bool commands = false;  // --commands: every command as one JSON line after the report
};

int report_mlx5(driver::function& fn, const request& r);
int report_bnxt(driver::function& fn, const abi::pci::device_id& id, const request& r);

}  // namespace rig::info
