#pragma once
/// @file
/// What the NIC reports beside the data path, the same for every family: a queue pair's state as
/// the firmware holds it (queue_pair::query), memory the firmware may still name (nic::stranded),
/// and a record of each firmware command (nic_options::trace).
#include "rig/config.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rig {

/// A queue pair's state (the IB state machine every RC family follows; IBTA vol 1 §10.3):
/// RESET, INIT, RTR (ready to receive), RTS (ready to send: connected), SQD (send queue
/// drained), SQE (send queue error), ERR (failed).
enum class qp_status : std::uint8_t { reset, init, rtr, rts, sqd, sqe, error };
/// The state's name as the IB spec writes it: "RTS".
std::string_view to_string(qp_status s) noexcept;

/// The firmware's view of a queue pair: state, peer, PSNs, retry settings, path.
struct qp_info {
    qp_status state = qp_status::reset;  ///< its state
    std::uint32_t remote_qp = 0;    ///< the peer's queue pair number
    std::uint32_t receive_psn = 0;  ///< the next PSN expected from the peer
    std::uint32_t send_psn = 0;     ///< the next PSN of its own sends
    std::uint32_t path_mtu = 0;     ///< bytes: 256 ... 4096 (0: not set yet)
    std::uint8_t ack_timeout = 0;   ///< 4.096 us * 2^n
    std::uint8_t retry_count = 0;   ///< retries of an unacknowledged send before it fails
    std::uint8_t rnr_retry = 0;     ///< retries while the peer has no receive posted; 7: without end
    std::uint8_t gid_index = 0;     ///< the local GID its packets carry
    std::uint16_t udp_source_port = 0;  ///< the RoCEv2 UDP source port of its packets
    std::array<std::byte, 16> remote_gid{};  ///< the peer's GID
    std::array<std::byte, 6> remote_mac{};   ///< the peer's MAC
    bool remote_read = false;       ///< the peer may read through this queue pair
    bool remote_write = false;      ///< the peer may write through this queue pair
};

/// Memory the NIC's firmware may still name after it stopped answering: kept allocated and
/// mapped for the life of the process, never reused (docs/guide.md, "The queue pair contract").
struct stranded_region {
    std::string what;        ///< "CQ 0x12 buffer", "firmware page", "command slot 3", ...
    std::uint64_t iova = 0;  ///< the device address the firmware knows it by
    std::size_t bytes = 0;   ///< its length
};

/// One firmware command as the device saw it: made for every command the device handed back
/// with a readable answer (its status OK or not). `in` and `out` are the whole command and answer
/// as the device sees them (mlx5: the 16 inline bytes, then the mailboxes' data).
struct command_record {
    std::string_view channel;    ///< "cmdq" (mlx5), "hwrm", "rcfw" (bnxt)
    std::uint16_t opcode = 0;    ///< the command's opcode in its channel
    std::string_view name;       ///< "ENABLE_HCA"
    std::uint16_t op_mod = 0;    ///< mlx5's op_mod (0 elsewhere)
    std::uint16_t status = 0;    ///< the status the firmware answered (0: OK)
    std::uint32_t syndrome = 0;  ///< mlx5 syndrome, bnxt cmd_err
    std::vector<std::byte> in;   ///< the command, whole
    std::vector<std::byte> out;  ///< the answer, whole
};

/// One JSON object on one line, keys in this order:
/// `{"channel": "cmdq", "opcode": 260, "name": "ENABLE_HCA", "op_mod": 0, "status": 0, "syndrome": 0,
///  "in": "<hex>", "out": "<hex>"}`
RIG_API std::string to_json(const command_record& r);

}  // namespace rig
