// qp_status names and the command record's JSON line.
#include "rig/info.hpp"

#include "abi/bits.hpp"

namespace rig {

std::string_view to_string(qp_status s) noexcept {
    switch (s) {
    case qp_status::reset: return "RESET";
    case qp_status::init: return "INIT";
    case qp_status::rtr: return "RTR";
    case qp_status::rts: return "RTS";
    case qp_status::sqd: return "SQD";
    case qp_status::sqe: return "SQE";
    case qp_status::error: return "ERROR";
    }
    return "unknown state";
}

std::string to_json(const command_record& r) {
    // The channel and the name come from the families' own tables (letters, digits, '_'):
    // nothing to escape.
    std::string s = "{\"channel\": \"" + std::string(r.channel) + "\"";
    s += ", \"opcode\": " + std::to_string(r.opcode);
    s += ", \"name\": \"" + std::string(r.name) + "\"";
    s += ", \"op_mod\": " + std::to_string(r.op_mod);
    s += ", \"status\": " + std::to_string(r.status);
    s += ", \"syndrome\": " + std::to_string(r.syndrome);
    s += ", \"in\": \"" + ::rig::abi::hex_bytes(r.in) + "\"";
    s += ", \"out\": \"" + ::rig::abi::hex_bytes(r.out) + "\"}";
    return s;
}

}  // namespace rig
