#include "firmware/mlx5/command_trace.hpp"

#include "abi/bits.hpp"

namespace rig::firmware::mlx5 {

std::string to_hex(std::span<const std::byte> bytes) { return ::rig::abi::hex_bytes(bytes); }

std::string to_json(const command_record& r) {
    // The name comes from our own opcode table (upper-case letters, digits, '_'): nothing to escape.
    std::string s = "{\"opcode\": " + std::to_string(static_cast<unsigned>(r.opcode));
    s += ", \"name\": \"" + std::string(r.name) + "\"";
    s += ", \"op_mod\": " + std::to_string(r.op_mod);
    s += ", \"status\": " + std::to_string(r.status);
    s += ", \"syndrome\": " + std::to_string(r.syndrome);
    s += ", \"in\": \"" + to_hex(r.in) + "\"";
    s += ", \"out\": \"" + to_hex(r.out) + "\"}";
    return s;
}

}  // namespace rig::firmware::mlx5
