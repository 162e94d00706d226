#pragma once
/// @file
/// What a work entry completed with, as a completion group hands it out (rig/group.hpp): the
/// queue pair and ring it was posted on, the caller's tag given at post time, the operation, the
/// bytes it moved, and why it failed when it did. The per-queue-pair poll (rig/qp.hpp) gives the
/// same entry's result as bytes or an error.
#include "rig/config.hpp"

#include <cstdint>
#include <optional>
#include <string_view>

#include "rig/error.hpp"

namespace rig {

/// A queue pair's two rings.
enum class side : std::uint8_t { send, receive };

/// What the entry asked for. A receive's completion says what consumed it: receive (a SEND or
/// SEND with immediate: the message in the receive's buffers) or write_imm (the peer's WRITE with
/// immediate: its bytes at the WRITE's target, the receive's buffers untouched; verbs'
/// IBV_WC_RECV_RDMA_WITH_IMM).
enum class operation : std::uint8_t { send, receive, write, read, send_imm, write_imm };

/// The operation in words: "send", "write with immediate".
constexpr std::string_view to_string(operation o) noexcept {
    switch (o) {
    case operation::send: return "send";
    case operation::receive: return "receive";
    case operation::write: return "write";
    case operation::read: return "read";
    case operation::send_imm: return "send with immediate";
    case operation::write_imm: return "write with immediate";
    }
    return "?";
}

/// Whether a send-side entry has a completion of its own (the post forms' last argument; verbs'
/// IBV_SEND_SIGNALED). no: when it succeeds it completes silently, with the next signalled entry
/// of its ring (a ring needs a signalled entry now and then, or its slots never come back: on mlx5
/// the NIC writes no CQE for it); when it fails it still reports its error, and the entries after
/// it complete flushed (seed: "a completion for a failed entry whatever signal says").
enum class signaled : std::uint8_t { yes, no };

/// What a work entry completed with (above).
struct completion {
    std::uint32_t qp = 0;               ///< the queue pair's number
    side ring = side::send;             ///< the ring it was posted on
    operation op = operation::send;     ///< what it asked for (a receive: what consumed it)
    std::uint64_t tag = 0;              ///< the caller's, given when the entry was posted
    std::uint32_t bytes = 0;            ///< bytes moved (a receive: the message's length); 0 when it failed
    /// A receive consumed by a SEND or WRITE with immediate: the 32-bit value its sender gave
    /// (host order; big-endian on the wire, IB spec 9.3.7). Empty otherwise.
    std::optional<std::uint32_t> immediate;
    /// Why it failed (kind entry; failure->flushed: it did not fail itself, its queue pair had
    /// failed). Empty: it completed Ok.
    std::optional<error> failure;

    /// Whether it completed Ok.
    bool ok() const noexcept { return !failure; }
};

}  // namespace rig
