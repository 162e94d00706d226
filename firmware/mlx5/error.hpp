#pragma once
// Errors of the mlx5 command channel: a value that names the command and what went wrong,
// never an abort (docs/guide.md, "Failures and errors").
//   "CREATE_QP (0x500): BAD_PARAM_ERR (0x3), syndrome 0x1234abcd"
//   "NOP (0x80d): did not complete within 100 ms"
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <utility>

#include "abi/mlx5/ifc/cmd.hpp"
#include "abi/mlx5/ifc/cmdq.hpp"

namespace rig::firmware::mlx5 {

namespace ifc = ::rig::mlx5::ifc;

enum class error_kind {
    delivery,    // the device could not read the command (cmd_queue_entry.status != OK)
    status,      // the firmware ran it and failed it (mbox_out.status != OK)
    timeout,     // no completion before the deadline: the slot and its mailboxes are stranded
    transport,   // the PCI layer failed (BAR access, DMA memory), or no slot is left
    bad_output,  // the completion does not match what was submitted (token, length)
    bad_input,   // the caller's command is malformed (shorter than its header)
    fatal,       // the NIC failed (health buffer fatal, function gone): nothing more is sent
};

constexpr std::string_view to_string(error_kind k) noexcept {
    switch (k) {
    case error_kind::delivery: return "delivery";
    case error_kind::status: return "status";
    case error_kind::timeout: return "timeout";
    case error_kind::transport: return "transport";
    case error_kind::bad_output: return "bad output";
    case error_kind::bad_input: return "bad input";
    case error_kind::fatal: return "fatal";
    }
    return "unknown error kind";
}

struct error {
    error_kind kind = error_kind::transport;
    ifc::opcode opcode{};       // 0 when no command was involved (setup)
    std::uint16_t op_mod = 0;
    ifc::cmd_status status = ifc::cmd_status::ok;                // kind == status
    ifc::delivery_status delivery = ifc::delivery_status::ok;     // kind == delivery
    std::uint32_t syndrome = 0;                                               // kind == status
    std::string message;
};

// An error no command's answer carries (setup, the PCI layer, the health buffer), said by `message`.
inline error plain_error(error_kind kind, std::string message) {
    error e;
    e.kind = kind;
    e.message = std::move(message);
    return e;
}
inline error transport_error(std::string message) { return plain_error(error_kind::transport, std::move(message)); }

template <class T>
using result = std::expected<T, error>;

}  // namespace rig::firmware::mlx5
