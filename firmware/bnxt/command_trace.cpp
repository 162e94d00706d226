#include "firmware/bnxt/command_trace.hpp"

#include "abi/bits.hpp"

namespace rig::firmware::bnxt {

std::string to_hex(std::span<const std::byte> bytes) { return ::rig::abi::hex_bytes(bytes); }

std::string to_json(const command_record& r) {
    // channel and name come from our own tables (upper/lower-case letters, digits, '_').
    std::string s = "{\"channel\": \"" + std::string(r.channel) + "\"";
    s += ", \"opcode\": " + std::to_string(r.opcode);
    s += ", \"name\": \"" + std::string(r.name) + "\"";
    s += ", \"status\": " + std::to_string(r.status);
    s += ", \"cmd_err\": " + std::to_string(r.cmd_err);
    s += ", \"in\": \"" + to_hex(r.in) + "\"";
    s += ", \"out\": \"" + to_hex(r.out) + "\"}";
    return s;
}

}  // namespace rig::firmware::bnxt
