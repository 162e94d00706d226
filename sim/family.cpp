// The families the device model serves (family.hpp).
#include "sim/family.hpp"

#include <algorithm>
#include <array>

#include "sim/mlx5/function_model.hpp"

namespace rig::sim {

namespace {

// bnxt's two firmware channels as --fault-fail names them: HWRM (bnxt_hsi.h: input req_type
// __le16; hwrm_err_output error_code __le16 and cmd_err u8, the syndrome) and the RoCE command
// channel (roce_hsi.h: cmdq_base opcode u8; creq_base status u8, no syndrome). What fatal's
// argument means is the bnxt model's (sim/bnxt).
constexpr pci::fault_channel bnxt_channels[] = {
    {.name = "hwrm", .opcode_name = "req_type", .max_opcode = 0xffff, .status_name = "error_code",
     .max_status = 0xffff, .max_syndrome = 0xff, .default_syndrome = 0},
    {.name = "rcfw", .opcode_name = "opcode", .max_opcode = 0xff, .status_name = "status", .max_status = 0xff,
     .max_syndrome = 0, .default_syndrome = 0},
};

constexpr std::string_view mlx5_options[] = {"--page-request-after", "--page-request-pages", "--trapped-uar-pages",
                                             "--report-ledger"};
constexpr std::string_view bnxt_options[] = {"--report-ledger"};

const family table[] = {
    {.name = "mlx5",
     .description = "ConnectX-6 Dx (15b3:101d)",
     .faults = mlx5::fault_space,
     .options = mlx5_options,
     .make = &mlx5::make_function},
    {.name = "bnxt",
     .description = "BCM57508 (14e4:1750)",
     // fatal: the firmware's reset notice, CODE its RESET_NOTIFY reason (bnxt_hsi.h
     // ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_REASON_CODE_*: 2 FW_EXCEPTION_FATAL), sim/bnxt
     .faults = {.family = "bnxt", .channels = bnxt_channels, .fatal_name = "reset notice reason", .min_fatal = 1,
                .max_fatal = 5},
     .options = bnxt_options,
     .make = &bnxt::make_function},
};

}  // namespace

bool family::takes(std::string_view option) const {
    return std::find(options.begin(), options.end(), option) != options.end();
}

std::span<const family> families() { return table; }

const family* find_family(std::string_view name) {
    for (const family& f : table) {
        if (f.name == name) {
            return &f;
        }
    }
    return nullptr;
}

std::string family_names() {
    std::string names;
    for (const family& f : table) {
        names += (names.empty() ? "" : ", ") + std::string(f.name);
    }
    return names;
}

// mlx5: the common options onto function_options; unset ones keep the model's defaults, but
// --page-request-pages, whose default is rig-nicsim's 16.
std::unique_ptr<served_function> mlx5::make_function(const common_options& c) {
    sim::mlx5::function_options o;
    o.function_index = c.index;
    o.firmware.mac = c.mac;
    o.init_time = c.init_time.value_or(o.init_time);
    o.command_latency = c.command_latency;
    o.firmware.msix_vectors = c.msix_vectors.value_or(o.firmware.msix_vectors);
    o.fault = sim::mlx5::to_fault_plan(c.fault);
    o.page_request_after = c.page_request_after.value_or(0);
    o.page_request_pages = c.page_request_pages.value_or(16);
    o.trapped_uar_pages = c.trapped_uar_pages.value_or(o.trapped_uar_pages);
    if (c.on_ledger) {
        o.on_ledger = [say = c.on_ledger](const sim::mlx5::ledger_entry& e) { say(sim::mlx5::to_string(e)); };
    }
    return std::make_unique<served<sim::mlx5::function_model>>(std::move(o));
}

}  // namespace rig::sim
