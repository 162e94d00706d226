#pragma once
// The public API's refusals (DESIGN.md §2): a value naming the call and the reason, and for a
// firmware refusal the command's opcode, status and syndrome; for a failed work entry the
// completion's syndrome. Misuse is not an error value: it throws std::invalid_argument.
//
//   "connect: INIT2RTR_QP (0x503): BAD_PARAM_ERR (0x3), syndrome 0x1234"
//   "send entry: REMOTE_ACCESS_ERR (syndrome 0x13)"
#include <cstdint>
#include <expected>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "driver/error.hpp"
#include "firmware/mlx5/error.hpp"

namespace rig {

enum class error_kind : std::uint8_t {
    os,        // the PCI layer or the OS refused (mapping, memory, the function)
    firmware,  // the NIC's firmware refused a command, or stopped answering
    entry,     // a work entry failed (its own fault, or its queue pair had failed: flushed)
};

struct error {
    std::string message;
    error_kind kind = error_kind::os;
    std::optional<std::uint16_t> opcode;    // firmware: the command
    std::optional<std::uint8_t> status;     // firmware: mbox_out.status (kind status)
    std::optional<std::uint32_t> syndrome;  // firmware: mbox_out.syndrome; entry: CQE syndrome
    bool flushed = false;                   // entry: it did not fail itself, its queue pair had
};

template <class T>
using result = std::expected<T, error>;

// Misuse is the caller's bug: thrown, never returned (DESIGN.md §2). Cold, so that the checks on
// the posting path stay a compare and a not-taken branch.
[[noreturn, gnu::cold]] inline void misuse(const std::string& what) { throw std::invalid_argument(what); }

// "<call>: <firmware message>", with the firmware's numbers.
inline error firmware_error(std::string_view call, const firmware::mlx5::error& e) {
    error out{std::string(call) + ": " + e.message, error_kind::firmware, std::nullopt, std::nullopt, std::nullopt,
              false};
    if (e.opcode != firmware::mlx5::ifc::opcode{}) {
        out.opcode = static_cast<std::uint16_t>(e.opcode);
    }
    if (e.kind == firmware::mlx5::error_kind::status) {
        out.status = static_cast<std::uint8_t>(e.status);
        out.syndrome = e.syndrome;
    }
    return out;
}

// "<call>: <PCI layer message>"
inline error os_error(std::string_view call, const driver::error& e) {
    return error{std::string(call) + ": " + e.message, error_kind::os, std::nullopt, std::nullopt, std::nullopt,
                 false};
}

}  // namespace rig
