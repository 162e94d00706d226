#pragma once
// The send ring of a bnxt RC queue pair in static WQE mode (P5): post entries, ring the doorbell
// once for many, and turn its requester completions into entry results (qp/ring.hpp).
//
// Posting (roce_hsi.h sq_send_hdr, sq_psn_search_ext; qplib_fp.c bnxt_qplib_post_send):
//   entry k (the unmasked producer count) takes the 128-byte WQE k & (size-1) (abi/bnxt/wqe.hpp
//   writes its bytes), and its PSN search entry k & (size-1) after the ring: the first PSN of its
//   message and the one after its last packet, the PSN counted from the send PSN of RTR->RTS by
//   ceil(bytes / path MTU) per message, 1 for 0 bytes (qplib_fp.c bnxt_qplib_fill_psn_search,
//   rdma-core verbs.c bnxt_re_fill_psns). The NIC reads them to retransmit.
// Ringing (one function, `ring`):
//   the batch's last WQE gets SIGNAL_COMP: one requester CQE then completes the whole batch
//   (CQE aggregation: qplib_fp.c bnxt_qplib_cq_process_req completes every WQE up to the CQE's
//   sq_cons_idx); an entry that fails completes with its own CQE, signalled or not;
//   to_device barrier; the SQ doorbell: index = producer mod size, epoch = its pass parity
//   (qplib_res.h bnxt_qplib_ring_prod_db), one 64-bit store to the SQ's word.
// A ring of 2^n WQEs holds 2^n - 1 (qplib_fp.h bnxt_qplib_queue_full: producer == consumer is
// empty), so `room` starts at 4095 on a 4096-WQE ring.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "abi/barriers.hpp"
#include "abi/bnxt/cqe.hpp"
#include "abi/bnxt/doorbell.hpp"
#include "abi/bnxt/wqe.hpp"
#include "qp/bnxt/queue_memory.hpp"
#include "qp/device_words.hpp"
#include "qp/ring.hpp"

namespace rig::qp::bnxt {

namespace abi = ::rig::bnxt::abi;
namespace barrier = ::rig::abi::barrier;

inline constexpr std::size_t wqe_bytes = abi::static_wqe_slots * abi::wqe_slot_size;   // 128

class send_queue {
public:
    // Throws std::invalid_argument for a ring that is not 2^n (2..32768) WQEs, a PSN area that is
    // not one 16-byte entry per WQE, a doorbell word missing or misaligned, or a qpn over 20 bits.
    send_queue(send_queue_memory m, std::uint32_t qpn);

    std::uint32_t room() const noexcept { return entries_.room(); }
    std::uint32_t slots() const noexcept { return entries_.slots(); }
    std::uint64_t posted() const noexcept { return entries_.posted(); }
    const qp::ring& entries() const noexcept { return entries_; }
    // Entry k's tag and operation, handed back with its result by a completion group.
    void label(std::uint64_t k, std::uint64_t tag, rig::operation op, bool signaled = true) noexcept {
        entries_.label(k, tag, op, signaled);
    }

    // The send PSN the QP starts from and its path MTU (RTR->RTS): the PSN search entries count
    // from here. Entries posted before (none: the API posts only once connected) keep theirs.
    void start(std::uint32_t psn, std::uint32_t path_mtu_bytes) noexcept {
        next_psn_ = psn & psn_mask;
        log_mtu_ = static_cast<std::uint32_t>(std::countr_zero(path_mtu_bytes));
    }

    // Writes one entry after the last one (unsignalled: ring() signals a batch's last) and its
    // PSN search entry, and returns its number; the NIC sees it at the next ring(). Misuse (no
    // room) throws std::invalid_argument and changes nothing. post_one: SEND, WRITE or READ of
    // one element, or SEND or WRITE with `immediate` (`remote` unused by the SENDs), the caller's values checked (qp.cpp); post: any
    // operation abi::write takes (inline data), which refuses what does not fit.
    [[gnu::always_inline]] std::uint64_t post_one(std::uint8_t wqe_type, const abi::local& l, std::uint64_t remote_va,
                                                  std::uint32_t remote_key, std::uint32_t immediate = 0) {
        entries_.check_room();
        const std::uint64_t k = entries_.posted();
        abi::fast::write_one(ring_.data() + (k & mask_) * wqe_bytes, wqe_type, 0, l, remote_va, remote_key, immediate);
        write_psn_entry(k, wqe_type, static_cast<std::uint32_t>(l.bytes));
        entries_.push_checked(k, static_cast<std::uint32_t>(l.bytes));
        return k;
    }
    // Posts n entries of one type, entry i being post_one's arguments `make(i)` (an element),
    // and returns the first's number. The room for all n is checked first, then the state the
    // entries' byte stores would make the compiler reload (ring, mask, PSN, MTU) is read once;
    // misuse (no room for n) throws std::invalid_argument and changes nothing (the caller
    // checked the values: rig::queue_pair's batch write).
    // Entry i's label (qp/ring.hpp: its tag, `op`, whether signalled) is stored in the same loop.
    template <class Make>
    [[gnu::always_inline, gnu::flatten]] std::uint64_t post_batch(std::uint32_t n, std::uint8_t wqe_type,
                                                                  rig::operation op, Make&& make) {
        entries_.check_room(n);
        const std::uint64_t first = entries_.posted();
        std::byte* const ring = ring_.data();
        std::byte* const psn = psn_search_.data();
        const std::uint64_t mask = mask_;
        const std::uint32_t log_mtu = log_mtu_;
        std::uint32_t next_psn = next_psn_;
        std::uint32_t* const lengths = entries_.slot_lengths();
        entry_label* const labels = entries_.slot_labels();
        const std::uint32_t length_mask = entries_.mask();
        for (std::uint32_t i = 0; i < n; ++i) {
            const std::uint64_t k = first + i;
            const element e = make(i);
            const auto bytes = static_cast<std::uint32_t>(e.l.bytes);
            abi::fast::write_one(ring + (k & mask) * wqe_bytes, wqe_type, 0, e.l, e.remote_va, e.remote_key);
            next_psn = psn_entry(psn, k & mask, wqe_type, bytes, log_mtu, next_psn);
            lengths[k & length_mask] = bytes;
            qp::ring::set_label(labels[k & length_mask], e.tag, op, e.signaled);
        }
        next_psn_ = next_psn;
        entries_.commit(first + n);
        return first;
    }
    // One entry of post_batch: its local element, the remote memory it reaches, its tag and
    // whether its success is handed out.
    struct element {
        abi::local l;
        std::uint64_t remote_va;
        std::uint32_t remote_key;
        std::uint64_t tag;
        bool signaled;
    };

    template <class Op>
    std::uint64_t post(const Op& o, std::uint8_t wqe_type, std::uint32_t bytes) {
        entries_.check_room();
        const std::uint64_t k = entries_.posted();
        const std::size_t slot = static_cast<std::size_t>(k & mask_) * abi::static_wqe_slots;
        abi::write(ring_, slot, abi::wqe_mode::static_128, o, false);
        write_psn_entry(k, wqe_type, bytes);
        entries_.push_checked(k, bytes);
        return k;
    }

    // The doorbell: tells the NIC about every entry posted since the last call. The only
    // function that writes this queue's doorbell word.
    void ring() noexcept {
        const std::uint64_t p = entries_.posted();
        if (p == rung_) {
            return;
        }
        std::byte* flags = ring_.data() + ((p - 1) & mask_) * wqe_bytes + signal_flags.off;
        *flags |= std::byte{abi::SQ_SEND_HDR_FLAGS_SIGNAL_COMP};
        barrier::to_device();   // the WQEs and PSN entries before the doorbell
        store_register(doorbell_, abi::fast_doorbell(abi::DBC_DBC_TYPE_SQ, qpn_, static_cast<std::uint32_t>(p & mask_),
                                                     ((p >> log_size_) & 1u) != 0));
        rung_ = p;
    }

    // A requester CQE of this queue pair (REQ): OK completes every entry through the one before
    // sq_cons_idx, an error status fails that entry (the ones before it succeeded). A CQE that
    // names no outstanding entry fails the ring: it holds a completion it does not take.
    void complete(std::uint8_t status, std::uint16_t sq_cons_idx) noexcept;
    // A TERMINAL CQE: the entries before sq_cons_idx succeeded, the queue pair failed.
    void terminal(std::uint16_t sq_cons_idx, entry_error e) noexcept;

    void fail(entry_error e) noexcept { entries_.fail(e); }
    void adopt_failure(entry_error e) noexcept { entries_.adopt_failure(e); }
    std::optional<entry_result> poll() noexcept { return entries_.take(); }

private:
    static constexpr std::uint32_t psn_mask = 0xffffff;
    // sq_send_hdr.flags, where SIGNAL_COMP lies (the same byte in sq_rdma_hdr)
    static constexpr abi::field_desc signal_flags = abi::field_of<abi::sq_send_hdr>("flags");
    static_assert(signal_flags.off == abi::field_of<abi::sq_rdma_hdr>("flags").off);

    // The PSN search entry of entry k: its message's first PSN and the one after its last packet.
    [[gnu::always_inline]] void write_psn_entry(std::uint64_t k, std::uint8_t wqe_type, std::uint32_t bytes) noexcept {
        next_psn_ = psn_entry(psn_search_.data(), k & mask_, wqe_type, bytes, log_mtu_, next_psn_);
    }
    // Writes slot `slot`'s PSN search entry for a message of `bytes` from `psn`; returns the PSN
    // after its last packet.
    [[gnu::always_inline]] static std::uint32_t psn_entry(std::byte* area, std::uint64_t slot, std::uint8_t wqe_type,
                                                          std::uint32_t bytes, std::uint32_t log_mtu,
                                                          std::uint32_t psn) noexcept {
        const std::uint32_t mtu_mask = (1u << log_mtu) - 1;
        const std::uint32_t packets = bytes == 0 ? 1u : (bytes >> log_mtu) + ((bytes & mtu_mask) != 0 ? 1u : 0u);
        const std::uint32_t next = (psn + packets) & psn_mask;
        abi::fast::write_psn_search(area + slot * abi::sq_psn_search_ext::layout_size, psn, wqe_type, next,
                                    static_cast<std::uint16_t>(slot * abi::static_wqe_slots));
        return next;
    }
    // The entry a CQE's sq_cons_idx names as the last it covers (sq_cons_idx - 1), if outstanding.
    std::optional<std::uint64_t> last_covered(std::uint16_t sq_cons_idx) const noexcept {
        return entries_.resolve((sq_cons_idx - 1u) & static_cast<std::uint32_t>(mask_),
                                static_cast<unsigned>(log_size_));
    }

    std::span<std::byte> ring_;
    std::span<std::byte> psn_search_;
    std::uint64_t mask_;
    std::uint32_t log_size_;
    std::byte* doorbell_;
    std::uint32_t qpn_;
    std::uint32_t next_psn_ = 0;
    std::uint32_t log_mtu_ = 10;
    std::uint64_t rung_ = 0;        // producer count the NIC was last told
    qp::ring entries_;
};

}  // namespace rig::qp::bnxt
