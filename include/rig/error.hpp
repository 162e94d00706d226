#pragma once
/// @file
/// The public API's refusals (docs/guide.md, "Failures and errors"): a value naming the call and
/// the reason, and for a
/// firmware refusal the channel the command went on, its opcode, status and syndrome (or error
/// code), each with its name; for a failed work entry the completion's syndrome. Misuse is not an
/// error value: it throws std::invalid_argument. The same shape for every family: mlx5 has one
/// channel, its command queue ("cmdq"); bnxt has two, HWRM ("hwrm") and the RoCE command channel
/// ("rcfw").
///
/// @code
///   "connect (INIT to RTR): INIT2RTR_QP (0x503): BAD_PARAM_ERR (0x3), syndrome 0x1234"
///   "send ring entry failed: REMOTE_ACCESS_ERR (syndrome 0x13, vendor 0x88)"
/// @endcode
#include "rig/config.hpp"

#include <cstdint>
#include <expected>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace rig {

/// Where a refusal came from.
enum class error_kind : std::uint8_t {
    os,        ///< the PCI layer or the OS refused (mapping, memory, the function)
    firmware,  ///< the NIC's firmware refused a command, or stopped answering
    entry,     ///< a work entry failed (its own fault, or its queue pair had failed: flushed)
};

/// A refusal of the API: what every `result` holds when it holds no value.
struct error {
    std::string message;  ///< the call and the reason, in words: what to log
    error_kind kind = error_kind::os;  ///< where it came from
    /// firmware: the command channel ("cmdq", "hwrm", "rcfw"); empty when no channel was involved
    std::string_view channel;
    std::optional<std::uint16_t> opcode;    ///< firmware: the command
    std::string_view opcode_name;           ///< firmware: "CREATE_QP"
    std::optional<std::uint16_t> status;    ///< firmware: the status it answered (mlx5 mbox_out.status, HWRM error_code)
    std::string_view status_name;           ///< firmware: "BAD_PARAM_ERR"
    std::optional<std::uint32_t> syndrome;  ///< firmware: mlx5 syndrome, bnxt cmd_err; entry: the completion's syndrome
    bool flushed = false;                   ///< entry: it did not fail itself, its queue pair had
};

/// What a call that can be refused returns: its value, or the rig::error saying why not.
template <class T>
using result = std::expected<T, error>;

/// An error with a message only (no command, no completion).
inline error plain_error(error_kind kind, std::string message) {
    error e;
    e.message = std::move(message);
    e.kind = kind;
    return e;
}

/// Misuse is the caller's bug: thrown, never returned (docs/guide.md, "Failures and errors").
/// Cold, so that the checks on the posting path stay a compare and a not-taken branch.
[[noreturn, gnu::cold]] inline void misuse(const std::string& what) { throw std::invalid_argument(what); }

}  // namespace rig
