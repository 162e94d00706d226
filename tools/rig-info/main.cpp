// rig-info: brings a NIC function up with Rig's own driver, prints what it is, and takes it
// down again. The family (mlx5 ConnectX, bnxt Thor) is the function's PCI IDs
// (driver/identify.hpp), read before any family's bring-up touches it.
//
//   rig-info 0000:3b:00.0                   (kernel VFIO: the function bound to vfio-pci)
//   rig-info vfio-user:/run/rig/mlx5-0.sock  (the device model, rig-nicsim)
//   rig-info --commands DEVICE              (also every command executed, one JSON object a line)
//
// Exit status 0 when the function came up and went down cleanly; otherwise one line on stderr
// saying why, and 1 (2 for a bad command line).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "driver/function.hpp"
#include "driver/identify.hpp"
#include "firmware/log.hpp"
#include "tools/rig-info/report.hpp"
#include "tools/rig-info/text.hpp"

namespace {

constexpr std::string_view usage =
    "usage: rig-info [--commands] DEVICE\n"
    "Brings an mlx5 (ConnectX) or bnxt (Thor) function up with Rig's driver, prints its firmware\n"
    "versions, the capabilities that matter to RoCE RC, the port state, MAC and GIDs, then tears\n"
    "it down.\n"
    "  DEVICE       0000:bb:dd.f (bound to vfio-pci) or vfio-user:PATH (rig-nicsim's socket)\n"
    "  --commands   also print every firmware command the driver executed, one JSON object per\n"
    "               line: {\"channel\": \"cmdq\", \"opcode\": 260, \"name\": \"ENABLE_HCA\", \"op_mod\": 0,\n"
    "               \"status\": 0, \"syndrome\": 0, \"in\": \"<hex>\", \"out\": \"<hex>\"}\n"
    "               (channel \"cmdq\" on mlx5; \"hwrm\" or \"rcfw\" on bnxt, syndrome its cmd_err)\n"
    "  --help       this text\n";

}  // namespace

int main(int argc, char** argv) {
    rig::info::request rq;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--help" || a == "-h") {
            std::fputs(usage.data(), stdout);
            return 0;
        }
        if (a == "--commands") {
            rq.commands = true;
        } else if (a.starts_with("-")) {
            std::fprintf(stderr, "rig-info: unknown option %s\n%s", argv[i], usage.data());
            return 2;
        } else if (rq.device.empty()) {
            rq.device = a;
        } else {
            std::fprintf(stderr, "rig-info: one DEVICE only (%s and %s)\n", rq.device.c_str(), argv[i]);
            return 2;
        }
    }
    if (rq.device.empty()) {
        std::fprintf(stderr, "rig-info: no DEVICE given\n%s", usage.data());
        return 2;
    }

    // One line on failure: the layers' own warnings only when asked for (SPDLOG_LEVEL=fw=warn)
    if (std::getenv("SPDLOG_LEVEL") == nullptr) {
        rig::firmware::log().set_level(spdlog::level::err);
    }
    auto fn = rig::driver::open(rq.device);
    if (!fn) {
        return rig::info::fail(fn.error().message);
    }
    auto id = rig::driver::identify(**fn);
    if (!id) {
        return rig::info::fail(id.error().message);
    }
    if ((*id)->family == rig::abi::pci::family::bnxt) {
        return rig::info::report_bnxt(**fn, **id, rq);
    }
    return rig::info::report_mlx5(**fn, rq);
}
