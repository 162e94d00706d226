#pragma once
// The send ring of an mlx5 RC queue pair: post entries, ring the doorbell once for many, and
// turn its requester completions into entry results (qp/ring.hpp).
//
// Posting (rdma-core mlx5dv.h and providers/mlx5/qp.c _mlx5_post_send):
//   entry k (the unmasked producer count) goes in 64-byte block k & (slots-1) with k's low 16
//   bits in the ctrl segment (abi/mlx5/entry.hpp writes the bytes). Every Rig entry is one
//   block, so the producer count in blocks is the entry number.
// Ringing (one function, `ring`, rdma-core post_send_db):
//   to_device barrier; record word MLX5_SND_DBR (+4) = be32(producer & 0xffff); then the bfreg's
//   doorbell (qp/mlx5/bfreg.hpp: its lock when shared, mmio_start, the last posted entry's first
//   8 bytes (ctrl opmod_idx_opcode + qpn_ds) as one 64-bit write, or the whole entry when the
//   doorbell announces that one entry alone and the bfreg copies (BlueFlame), mmio_flush, the
//   bfreg's other half next time).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <type_traits>

#include "abi/barriers.hpp"
#include "abi/mlx5/completion.hpp"
#include "abi/mlx5/doorbell.hpp"
#include "abi/mlx5/entry.hpp"
#include "qp/mlx5/bfreg.hpp"
#include "qp/mlx5/device_words.hpp"
#include "qp/ring.hpp"

namespace rig::qp::mlx5 {

namespace abi = ::rig::mlx5::abi;
namespace barrier = ::rig::abi::barrier;

// Where a send queue's memory lies (all of it set up by firmware/mlx5/objects.hpp's qp).
struct send_queue_memory {
    std::span<std::byte> ring;             // the SQ: 2^n 64-byte blocks, 64-byte aligned
    std::span<std::byte> doorbell_record;  // the QP's 8-byte record (receive +0, send +4)
    bfreg* doorbell = nullptr;             // the bfreg it rings through (shared with other QPs),
                                           // which outlives the queue
};

class send_queue {
public:
    // post_batch without labels (the caller labels, or bench-post's queue alone).
    struct no_label {};

    // Throws std::invalid_argument for a ring that is not 2^n (1..32768) blocks, a record shorter
    // than 8 bytes or misaligned, or no bfreg, or qpn over 24 bits.
    send_queue(send_queue_memory m, std::uint32_t qpn);

    std::uint32_t room() const noexcept { return entries_.room(); }
    std::uint32_t slots() const noexcept { return entries_.slots(); }
    std::uint64_t posted() const noexcept { return entries_.posted(); }
    bool failed() const noexcept { return entries_.failed(); }
    const qp::ring& entries() const noexcept { return entries_; }
    // Entry k's tag and operation, handed back with its result by a completion group.
    void label(std::uint64_t k, std::uint64_t tag, rig::operation op, bool signaled = true) noexcept {
        entries_.label(k, tag, op, signaled);
    }

    // Writes one entry after the last one and returns its number; the NIC sees it at the next
    // ring(). Misuse (no room, a value abi refuses) throws std::invalid_argument and changes
    // nothing: neither the ring memory nor the counts.
    // always_inline + flatten: abi's writer and this function land in the caller's loop (g++
    // left the writer out of line), so the entry number stays in a register across the entry's
    // stores, which the compiler must otherwise assume alias the counts (bench-post).
    template <class Op>
    [[gnu::always_inline, gnu::flatten]] std::uint64_t post(const Op& o, bool signal) {
        entries_.check_room();
        const std::uint64_t k = entries_.posted();
        abi::write(block(ring_.data(), k, mask_), 0, qpn_ & abi::max_qp, static_cast<std::int64_t>(k & 0xffff), o,
                   signal);
        entries_.push_checked(k, length(o));
        return k;
    }

    // Posts n entries in one go, entry i being `make(i)` (an operation) with `signal(i)`; the NIC
    // sees them at the next ring(). The room for all n is checked first, and the queue's state
    // (ring, mask, qpn, lengths) is read once into locals: an entry's stores are byte stores,
    // which the compiler must assume alias this object's members, so post() reloads them for
    // every entry (bench-post: 32 per doorbell). Misuse (no room for n, a value abi refuses)
    // throws std::invalid_argument and posts nothing: the counts stay, and the slots written
    // for the batch's earlier entries are free slots the NIC does not read.
    // `label(i, signaled, slot)`, if given, writes entry i's label (qp/ring.hpp) into its slot, in
    // the same loop; `signaled` is signal(i), asked once (after the entry's byte stores the
    // compiler would read and test the caller's flag again).
    template <class Make, class Signal, class Label = no_label>
    [[gnu::always_inline, gnu::flatten]] std::uint64_t post_batch(std::uint32_t n, Make&& make, Signal&& signal,
                                                                  Label&& label = {}) {
        entries_.check_room(n);
        const std::uint64_t first = entries_.posted();
        std::byte* const ring = ring_.data();
        const std::uint64_t mask = mask_;   // the ring's and the bookkeeping's: one slot count
        const std::int64_t qpn = qpn_ & abi::max_qp;
        std::uint32_t* const lengths = entries_.slot_lengths();
        entry_label* const labels = entries_.slot_labels();
        for (std::uint32_t i = 0; i < n; ++i) {
            const std::uint64_t k = first + i;
            const auto o = make(i);
            const bool s = signal(i);
            abi::write(block(ring, k, mask), 0, qpn, static_cast<std::int64_t>(k & 0xffff), o, s);
            lengths[k & mask] = length(o);
            if constexpr (!std::is_same_v<std::remove_cvref_t<Label>, no_label>) {
                label(i, s, labels[k & mask]);
            }
        }
        entries_.commit(first + n);
        return first;
    }

    // The doorbell: tells the NIC about every entry posted since the last call. The only
    // function that writes this queue's doorbell record word or rings its bfreg. One new entry
    // (nreq == 1 in rdma-core; every Rig entry is one 64-byte block, which fits a bfreg half) is
    // copied in whole when the bfreg copies entries of its kind (bfreg::copies); the NIC still
    // finds every entry in the ring, where it was written first.
    void ring() noexcept {
        const std::uint64_t p = entries_.posted();
        if (p == rung_) {
            return;
        }
        barrier::to_device();   // entries before the record: the NIC may read them once it moves
        store_record(record_, abi::qp_dbr_counter(static_cast<std::uint32_t>(p)));
        const std::byte* const last = ring_.data() + ((p - 1) & mask_) * abi::entry_size;
        const bool one = p - rung_ == 1;
        rung_ = p;   // before the bfreg's ring: nothing of this queue is live across it
        bf_->ring(last, one && copies(last));
    }

    // A completion whose QPN is this queue pair's and that belongs to its send side: REQ (the
    // entry named by wqe_counter and every unsignaled one before it succeeded) or REQ_ERR (that
    // entry failed: the ring fails). Any other kind, or a counter naming no outstanding entry,
    // fails the ring: it holds a completion of a kind it does not take.
    void complete(const abi::completion& c) noexcept;

    // The NIC or the other ring failed the queue pair: entries without a result fail with `e`.
    void fail(entry_error e) noexcept { entries_.fail(e); }
    // Failed only by flushes so far: the queue pair's failure is what its entries carry.
    void adopt_failure(entry_error e) noexcept { entries_.adopt_failure(e); }

    // The oldest entry's result once it has one (qp/ring.hpp take).
    std::optional<entry_result> poll() noexcept { return entries_.take(); }

    const bfreg& doorbell() const noexcept { return *bf_; }

private:
    // Entry k's 64-byte block, the buffer abi::write writes at offset 0, and the qpn masked to 24
    // bits (post, post_batch): the constructor made the ring exactly slots() blocks and refused a
    // wider qpn, so neither changes a value, but given so, abi's checks of the place and the qpn
    // fold to constants instead of four compares and a reload of the ring's size per entry
    // (bench-post). abi still checks every value of the entry itself.
    static std::span<std::byte> block(std::byte* ring, std::uint64_t k, std::uint64_t mask) noexcept {
        return {ring + static_cast<std::size_t>(k & mask) * abi::entry_size, abi::entry_size};
    }

    static std::uint32_t length(const abi::write_op& o) noexcept { return len(o.src.bytes); }
    static std::uint32_t length(const abi::read_op& o) noexcept { return len(o.dst.bytes); }
    static std::uint32_t length(const abi::send_op& o) noexcept { return len(o.src.bytes); }
    static std::uint32_t length(const abi::write_imm_op& o) noexcept { return len(o.src.bytes); }
    static std::uint32_t length(const abi::send_imm_op& o) noexcept { return len(o.src.bytes); }
    static std::uint32_t length(const abi::write_inline_op& o) noexcept {
        return static_cast<std::uint32_t>(o.data.size());
    }
    static std::uint32_t len(std::int64_t n) noexcept { return static_cast<std::uint32_t>(n); }

    // Whether a doorbell of this one entry copies it (bfreg::rule). Inline-ness is read from the
    // entry, and only under copy_rule::inline_entries (a flag kept per post cost the post path a
    // store, bench-post): Rig's only inline entry is the inline WRITE, an RDMA WRITE whose segment
    // after ctrl + raddr has MLX5_INLINE_SEG in its byte count, which a WRITE's data segment
    // never has (lengths under 2^31: abi/mlx5/entry.hpp).
    bool copies(const std::byte* entry) const noexcept {
        const copy_rule r = bf_->rule();
        if (r != copy_rule::inline_entries) {
            return r == copy_rule::single_entries;
        }
        constexpr std::size_t inline_segment = 32;   // ctrl 16 + raddr 16
        return entry[3] == static_cast<std::byte>(abi::send_opcode::rdma_write) &&
               (::rig::abi::load_be<std::uint32_t>(entry + inline_segment) & abi::inline_seg_flag) != 0;
    }

    std::span<std::byte> ring_;
    std::uint64_t mask_;
    std::byte* record_;             // the send counter word (record + 4)
    bfreg* bf_;
    std::int64_t qpn_;
    std::uint64_t rung_ = 0;        // producer count the NIC was last told
    qp::ring entries_;
};

}  // namespace rig::qp::mlx5
