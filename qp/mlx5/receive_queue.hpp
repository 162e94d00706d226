#pragma once
// The receive ring of an mlx5 RC queue pair (rdma-core providers/mlx5/qp.c
// mlx5_post_recv):
//   entry k in slot k & (slots-1) of `stride` bytes: its scatter list, ended by a segment of
//   byte_count 0 and lkey MLX5_INVALID_LKEY when shorter than the slot (abi write_receive);
//   then to_device barrier and record word MLX5_RCV_DBR (+0) = be32(k + 1 & 0xffff).
//   A 2^31-byte element takes two segments (abi/mlx5/entry.hpp), so make_qp's slots are 32 bytes.
//   A receive has no MMIO doorbell: the record is the whole post.
// A responder CQE (RESP_SEND) carries in wqe_counter the index of the entry it filled and in
// byte_cnt the length of the message; RESP_ERR fails the entry and the ring.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "abi/barriers.hpp"
#include "abi/mlx5/completion.hpp"
#include "abi/mlx5/doorbell.hpp"
#include "abi/mlx5/entry.hpp"
#include "qp/mlx5/device_words.hpp"
#include "qp/ring.hpp"

namespace rig::qp::mlx5 {

namespace abi = ::rig::mlx5::abi;
namespace barrier = ::rig::abi::barrier;

struct receive_queue_memory {
    std::span<std::byte> ring;             // the RQ: 2^n slots of `stride` bytes
    std::size_t stride = 0;                // 16 << qpc.log_rq_stride
    std::span<std::byte> doorbell_record;  // the QP's 8-byte record (receive +0, send +4)
};

class receive_queue {
public:
    // Throws std::invalid_argument for a stride that is not 2^n >= 16, a ring that is not 2^n
    // (1..32768) slots of it, or a record shorter than 8 bytes or misaligned.
    explicit receive_queue(receive_queue_memory m);

    std::uint32_t room() const noexcept { return entries_.room(); }
    std::uint32_t slots() const noexcept { return entries_.slots(); }
    std::uint64_t posted() const noexcept { return entries_.posted(); }
    bool failed() const noexcept { return entries_.failed(); }
    const qp::ring& entries() const noexcept { return entries_; }
    // Entry k's tag and operation, handed back with its result by a completion group.
    void label(std::uint64_t k, std::uint64_t tag, rig::operation op) noexcept { entries_.label(k, tag, op); }

    // Writes one receive entry (its scatter list) and returns its number; the NIC sees it at the
    // next ring(). Misuse (no room, a list abi refuses) throws std::invalid_argument and changes
    // nothing.
    std::uint64_t post(std::span<const abi::local> scatter) {
        entries_.check_room();
        const std::uint64_t k = entries_.posted();
        abi::write_receive(ring_, static_cast<std::size_t>(k & mask_) * stride_, stride_, scatter);
        std::uint64_t capacity = 0;
        for (const abi::local& l : scatter) {
            capacity += static_cast<std::uint64_t>(l.bytes);
        }
        entries_.push_checked(k, static_cast<std::uint32_t>(capacity > 0xffffffffu ? 0xffffffffu : capacity));
        return k;
    }
    std::uint64_t post(const abi::local& one) { return post(std::span<const abi::local>(&one, 1)); }

    // The one function that writes the receive counter word.
    void ring() noexcept {
        const std::uint64_t p = entries_.posted();
        if (p == rung_) {
            return;
        }
        barrier::to_device();   // entries before the counter that hands them to the NIC
        store_record(record_, abi::qp_dbr_counter(static_cast<std::uint32_t>(p)));
        rung_ = p;
    }

    // A completion of this queue pair's receive side: RESP_SEND (the entry named by wqe_counter
    // took a message of byte_cnt bytes) or RESP_ERR (it failed: the ring fails). Any other kind,
    // or a counter naming no outstanding entry, fails the ring.
    void complete(const abi::completion& c) noexcept;

    void fail(entry_error e) noexcept { entries_.fail(e); }
    // Failed only by flushes so far: the queue pair's failure is what its entries carry.
    void adopt_failure(entry_error e) noexcept { entries_.adopt_failure(e); }
    std::optional<entry_result> poll() noexcept { return entries_.take(); }

private:
    std::span<std::byte> ring_;
    std::size_t stride_;
    std::uint64_t mask_;
    std::byte* record_;            // the receive counter word (record + 0)
    std::uint64_t rung_ = 0;
    qp::ring entries_;
};

}  // namespace rig::qp::mlx5
