#pragma once
// firmware/bnxt's errors and command records as the API's (rig/error.hpp, rig/info.hpp): the
// channel the command went on ("hwrm": the request's req_type, its error_code and cmd_err;
// "rcfw": the CMDQ opcode and the CREQ status), each with the name abi/bnxt gives it. Internal to
// qp/ (and rig-info, which drives firmware/bnxt itself).
#include <string>
#include <string_view>

#include "abi/bnxt/hwrm.hpp"
#include "abi/bnxt/rcfw.hpp"
#include "firmware/bnxt/command_trace.hpp"
#include "firmware/bnxt/error.hpp"
#include "rig/error.hpp"
#include "rig/info.hpp"

namespace rig::qp::bnxt {

inline constexpr std::string_view channel_hwrm = "hwrm";
inline constexpr std::string_view channel_rcfw = "rcfw";

// The firmware's message as it is ("MODIFY_QP (0x3): INVALID_PARAMETER (0x5)",
// "FUNC_QCFG (0x16): INVALID_PARAMS (0x2), cmd_err 0x1"), `call: ` in front when given. The
// opcode when the error names a request (HWRM VER_GET is req_type 0: named by its message), the
// status and, on HWRM, cmd_err as the syndrome when the firmware answered one.
inline error to_error(const firmware::bnxt::error& e, std::string_view call = {}) {
    namespace babi = ::rig::bnxt::abi;
    error out = plain_error(error_kind::firmware, call.empty() ? e.message : std::string(call) + ": " + e.message);
    const bool rcfw = e.channel == channel_rcfw;
    const bool names_request =
        e.req_type != 0 || e.kind == firmware::bnxt::error_kind::status || (!rcfw && e.message.starts_with("VER_GET"));
    if (!names_request) {
        return out;
    }
    out.channel = rcfw ? channel_rcfw : channel_hwrm;
    out.opcode = e.req_type;
    out.opcode_name = rcfw ? babi::cmdq_opcode_name(static_cast<std::uint8_t>(e.req_type))
                           : babi::hwrm_req_type_name(e.req_type);
    if (e.kind == firmware::bnxt::error_kind::status) {
        out.status = e.error_code;
        out.status_name = rcfw ? babi::creq_qp_event_status_name(static_cast<std::uint8_t>(e.error_code))
                               : babi::hwrm_err_code_name(e.error_code);
        if (!rcfw) {
            out.syndrome = e.cmd_err;
        }
    }
    return out;
}

// The channel's trace record: cmd_err in the syndrome's place, no op_mod (HWRM and the CMDQ
// have none); the same keys as every family's (rig-info --commands).
inline command_record to_record(const firmware::bnxt::command_record& r) {
    return {r.channel, r.opcode, r.name, 0, r.status, r.cmd_err, r.in, r.out};
}

}  // namespace rig::qp::bnxt
