#pragma once
// The command trace of the bnxt channels: what the firmware answered, request by request, as
// the device saw it. Off by default; a channel pays one branch per request when it is off.
//
//   ch.trace([&](const command_record& r) { lines.push_back(to_json(r)); });
//
// A record is made for every request the firmware answered (its error_code SUCCESS or not); a
// request that timed out yields none (its error says why). `in` is the whole request as the
// firmware reads it (the full request of a short command, not its 16-byte pointer), `out` the
// whole response, resp_len bytes (issue 14 §3, rig-info --commands).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rig::firmware::bnxt {

struct command_record {
    std::string_view channel = "hwrm";  // "hwrm" | "rcfw"
    std::uint16_t opcode = 0;           // HWRM req_type (RCFW: the CMDQ opcode)
    std::string_view name;              // "FUNC_QCAPS"; "" for a request abi/bnxt does not name
    std::uint16_t status = 0;           // HWRM error_code (RCFW: CREQ status)
    std::uint8_t cmd_err = 0;           // hwrm_err_output.cmd_err (0 on success)
    bool short_command = false;         // sent through hwrm_short_input
    std::vector<std::byte> in;
    std::vector<std::byte> out;
};

// Called on the thread that ran the request, with the channel locked: it must not send requests.
using command_sink = std::function<void(const command_record&)>;

// Lowercase hex of every byte, no separators.
std::string to_hex(std::span<const std::byte> bytes);

// One JSON object on one line, keys in this order (mlx5's, with the channel first and cmd_err
// for the syndrome):
// {"channel": "hwrm", "opcode": 21, "name": "FUNC_QCAPS", "status": 0, "cmd_err": 0, "in": "<hex>", "out": "<hex>"}
std::string to_json(const command_record& r);

}  // namespace rig::firmware::bnxt
