#pragma once
// The command trace: what the driver's command queue executed, command by command, as the
// device saw it. Off by default; the queue pays one branch per command when it is off.
//
//   q.trace([&](const command_record& r) { lines.push_back(to_json(r)); });
//
// A record is made for every command the device handed back with a readable output (its
// status OK or not); a command not delivered or never completed yields none (its error says
// why). `in` and `out` are the whole command input and output as the device sees them: the
// 16 inline bytes followed by the mailbox data, in order, trimmed to the command's input and
// output length (issue 4, rig-info --commands).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "abi/mlx5/ifc/cmd.hpp"

namespace rig::firmware::mlx5 {

struct command_record {
    rig::mlx5::ifc::opcode opcode{};
    std::string_view name;  // the kernel's name, "ENABLE_HCA"; "unknown command opcode" for others
    std::uint16_t op_mod = 0;
    std::uint8_t status = 0;     // mbox_out.status
    std::uint32_t syndrome = 0;  // mbox_out.syndrome
    std::vector<std::byte> in;
    std::vector<std::byte> out;
};

// Called on the thread that ran the command, with the queue locked: it must not run commands.
using command_sink = std::function<void(const command_record&)>;

// Lowercase hex of every byte, no separators.
std::string to_hex(std::span<const std::byte> bytes);

// One JSON object on one line, keys in this order:
// {"opcode": 260, "name": "ENABLE_HCA", "op_mod": 0, "status": 0, "syndrome": 0, "in": "<hex>", "out": "<hex>"}
std::string to_json(const command_record& r);

}  // namespace rig::firmware::mlx5
