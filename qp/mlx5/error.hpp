#pragma once
// firmware/mlx5's errors and command records as the API's (rig/error.hpp, rig/info.hpp): channel
// "cmdq", the opcode and, for a status the firmware answered, the status and syndrome, each with
// the kernel's name. Internal to qp/ (and rig-info, which drives firmware/mlx5 itself).
#include <string>
#include <string_view>

#include "abi/mlx5/ifc/cmd.hpp"
#include "firmware/mlx5/command_trace.hpp"
#include "firmware/mlx5/error.hpp"
#include "rig/error.hpp"
#include "rig/info.hpp"

namespace rig::qp::mlx5 {

inline constexpr std::string_view channel = "cmdq";  // mlx5's one command channel, the command queue

// The firmware's message as it is ("CREATE_QP (0x500): BAD_PARAM_ERR (0x3), syndrome 0x1234"),
// `call: ` in front when given.
inline error to_error(const firmware::mlx5::error& e, std::string_view call = {}) {
    namespace ifc = ::rig::mlx5::ifc;
    error out = plain_error(error_kind::firmware, call.empty() ? e.message : std::string(call) + ": " + e.message);
    if (e.opcode != ifc::opcode{}) {
        out.channel = channel;
        out.opcode = static_cast<std::uint16_t>(e.opcode);
        out.opcode_name = ifc::to_string(e.opcode);
    }
    if (e.kind == firmware::mlx5::error_kind::status) {
        out.status = static_cast<std::uint16_t>(e.status);
        out.status_name = ifc::to_string(e.status);
        out.syndrome = e.syndrome;
    }
    return out;
}

inline command_record to_record(const firmware::mlx5::command_record& r) {
    return {channel, static_cast<std::uint16_t>(r.opcode), r.name, r.op_mod, r.status, r.syndrome, r.in, r.out};
}

}  // namespace rig::qp::mlx5
