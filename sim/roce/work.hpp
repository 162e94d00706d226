#pragma once
// Work requests and completions of the RC engine, family-neutral: a NIC model parses its own
// work entries (mlx5 WQEs, bnxt SQEs) into these and writes its own completion entries (CQEs)
// from the completions. Statuses are named after IB's work completion statuses (verbs'
// ibv_wc_status), which both families' syndromes map onto (mlx5: the error
// CQE syndromes mapped by rdma-core's providers/mlx5/cq.c mlx5_handle_error_cqe).
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rig::sim::roce {

inline constexpr std::size_t max_sge = 16;             // scatter/gather entries per request
inline constexpr std::size_t max_inline = 256;         // inline bytes a send request carries
inline constexpr std::uint64_t max_message = 1ull << 31;  // IB: a message is at most 2^31 bytes
// Packets of one message at path MTU `mtu`, a power of two (IB 256..4096; rc_qp refuses other
// paths): a zero-length message is still one packet (an ONLY with no payload), which takes a PSN
// like any other. A shift, not a 64-bit division (tens of cycles, once per message: perf
// annotate of rc_qp::start_next_entry).
inline constexpr std::uint32_t packets_of(std::uint64_t bytes, std::uint32_t mtu) noexcept {
    return bytes == 0 ? 1u : static_cast<std::uint32_t>((bytes + mtu - 1) >> std::countr_zero(mtu));
}

// One piece of local memory: a region's key (L_Key), a virtual address in it, a length.
// 16 bytes: the address first, so that no padding lies between the fields (a request holds 16).
struct sge {
    std::uint64_t va = 0;
    std::uint32_t key = 0;
    std::uint32_t length = 0;
};

enum class work_op : std::uint8_t { send, write, read };
std::string_view to_string(work_op op) noexcept;

struct send_request {
    std::uint32_t index = 0;  // the family's entry index (mlx5 wqe counter), echoed in its completion
    work_op op = work_op::send;
    bool signaled = true;     // a success completes silently when false; an error always completes
    std::uint8_t sge_count = 0;   // 0 when inline
    // Inline: the bytes travel in the request (SEND and WRITE only), in place of the scatter list
    // (a WQE has one or the other: mlx5 and bnxt parsers refuse both): one holds what the other
    // would, so a request, and each entry of a queue pair's send shadow (rc_qp), is half the size.
    bool is_inline = false;
    std::uint32_t inline_bytes = 0;
    union {
        std::array<sge, max_sge> sg{};
        std::array<std::byte, max_inline> inline_data;
    };
    // WRITE and READ: the peer's memory (R_Key, virtual address).
    std::uint64_t remote_va = 0;
    std::uint32_t rkey = 0;
    // SEND and WRITE with immediate: the message's last packet carries ImmDt (IB spec 9.3.7),
    // which the peer hands over with the receive it consumes.
    bool with_immediate = false;
    std::uint32_t immediate = 0;

    // Bytes the message moves: the inline bytes or the sum of the scatter list.
    std::uint64_t length() const noexcept;
};

struct receive_request {
    std::uint32_t index = 0;
    std::uint8_t sge_count = 0;
    std::array<sge, max_sge> sg{};
    std::uint64_t capacity() const noexcept;
};

enum class completion_status : std::uint8_t {
    success,
    local_length,            // a message longer than the receive it landed in (responder side)
    local_qp_operation,      // a malformed request (too many sges, too long, inline on READ)
    local_protection,        // a local key, range or right refused
    remote_access,           // the peer NAKed: remote access error (bad rkey, bounds, right)
    remote_invalid_request,  // the peer NAKed: invalid request (its receive too small, bad opcode order)
    remote_operation,        // the peer NAKed: remote operational error
    retry_exceeded,          // no acknowledgement after retry_count retransmissions
    rnr_retry_exceeded,      // receiver not ready after rnr_retry retries
    flushed,                 // not run: the queue pair had failed
};
std::string_view to_string(completion_status s) noexcept;

enum class completion_side : std::uint8_t { send, receive };

struct completion {
    completion_side side = completion_side::send;
    std::uint32_t index = 0;
    completion_status status = completion_status::success;
    std::uint32_t byte_len = 0;  // a send's bytes; a receive: the length of the message it took
    // A receive: what consumed it, send (its bytes in the receive's buffers) or write (a WRITE
    // with immediate: its bytes at the WRITE's target, byte_len its length).
    work_op op = work_op::send;
    bool with_immediate = false;  // a receive consumed by a message with ImmDt
    std::uint32_t immediate = 0;
};

}  // namespace rig::sim::roce
