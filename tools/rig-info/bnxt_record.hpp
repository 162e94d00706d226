#pragma once
// A bnxt channel's trace record (firmware/bnxt/command_trace.hpp) as the API's family-neutral
// rig::command_record (qp/info.hpp), so that rig-info --commands prints the same keys for every
// family: the channel ("hwrm" | "rcfw"), cmd_err in the syndrome's place, no op_mod (HWRM and
// the CMDQ have none). It belongs next to qp/mlx5/error.hpp's to_record once qp/bnxt exists.
#include "firmware/bnxt/command_trace.hpp"
#include "qp/info.hpp"

namespace rig::info {

inline command_record to_record(const firmware::bnxt::command_record& r) {
    return {r.channel, r.opcode, r.name, 0, r.status, r.cmd_err, r.in, r.out};
}

}  // namespace rig::info
