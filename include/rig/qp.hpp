#pragma once
/// @file
/// A reliable-connected queue pair of one NIC (docs/guide.md, "Queue pairs" and "The queue pair
/// contract", whose every sentence holds here). `rig::qp` is the namespace of the family data
/// paths (qp/ring.hpp, qp/mlx5/), so the class is `rig::queue_pair`. Posting and polling go
/// straight to the family's data path (no virtual call per entry); connect, destroy and query go
/// through the NIC's family control plane.
///
/// @code
///   rig::queue_pair q = nic->make_qp().value();   // unconnected, random 24-bit PSN
///   send_to_peer(q.local().to_string());
///   q.connect(peer).value();                      // RESET -> INIT -> RTR -> RTS
///   q.receive(r, 0, 4096);  q.send(r, 0, 64);  q.write(r, 0, 64, peer_remote);
///   while (!q.poll(rig::side::send)) {}
///   q.destroy();
/// @endcode
///
/// Posting: send/receive/write/write_inline/read (and send_imm/write_imm, with immediate data)
/// write one entry and ring the doorbell. The
/// post_* forms write the entry only; ring(side) then tells the NIC about every entry posted
/// since the last ring, with one doorbell (batching).
/// Batches: write(r, span of write_entry) checks every entry first, then writes them all and rings
/// once; post_write(r, span) the same without the doorbell. One call per doorbell costs what the
/// per-entry form costs for one entry (bench-post's "queue_pair batch" rows).
/// Misuse throws std::invalid_argument and changes nothing: destroyed, not connected, a region of
/// another NIC or deregistered, bytes outside the region, n over 2^31 (one message: the seed's
/// limit), inline data over what one entry holds (max_inline(): mlx5 28 bytes, bnxt 96), no room
/// on the ring.
/// Threads: one thread at a time per queue pair for post and poll (not enforced); connect and
/// destroy take the NIC's lock. A queue pair must not be used after its NIC is destroyed.
#include "rig/config.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "rig/completion.hpp"
#include "rig/endpoint.hpp"
#include "rig/error.hpp"
#include "rig/handle.hpp"
#include "rig/info.hpp"
#include "rig/region.hpp"

namespace rig {

class nic;

/// One RDMA WRITE of a batch (queue_pair::write and post_write over a span): the `n` bytes at
/// `at` of the batch's region to the peer's memory at `to`, with its `tag` and `sig` as the
/// single-entry forms take them.
struct write_entry {
    std::size_t at = 0;            ///< the first byte's offset in the batch's region
    std::size_t n = 0;             ///< how many bytes (at most 2^31)
    remote to{};                   ///< where in the peer's memory they land
    std::uint64_t tag = 0;         ///< the caller's, handed back by a completion group
    signaled sig = signaled::yes;  ///< signaled::no: no result of its own on success
};

namespace detail {
struct qp_state;
struct bench_access;  // bench/post_bench.cpp: the post path over plain memory, without a NIC
}

/// A reliable-connected queue pair of one NIC (above). Moved, never copied; a moved-from or
/// default queue pair is empty.
class RIG_API queue_pair : private detail::handle<detail::qp_state> {
public:
    queue_pair() = default;
    /// Takes the other handle's queue pair; that handle is left empty.
    queue_pair(queue_pair&&) noexcept = default;
    /// Takes the other handle's queue pair; that handle is left empty (a queue pair this one
    /// named stays the NIC's until its close()).
    queue_pair& operator=(queue_pair&&) noexcept = default;

    /// {qp number, first PSN of its sends, the NIC's GID 0, the NIC's MAC}.
    endpoint local() const;
    /// Its queue pair number (24 bits).
    std::uint32_t number() const;
    /// Whether connect() succeeded.
    bool connected() const;
    /// Whether destroy() was called (an empty handle counts as destroyed).
    bool destroyed() const noexcept;

    /// RESET -> INIT -> RTR -> RTS to the peer `e` (a queue pair of another NIC, of this NIC, or
    /// this one): ack timeout 14 (67 ms), retry 7, RNR retry 7 (without end). Error if the
    /// firmware refuses a step; called again, the queue pair goes back to RESET first.
    /// Misuse: destroyed, already connected, e.qp or e.psn over 24 bits.
    result<void> connect(const endpoint& e);
    /// The same at a path MTU both sides agreed out of band (perftest's check_mtu: the smaller of
    /// the two offers), so that neither sends packets longer than the other takes: 256, 512,
    /// 1024, 2048 or 4096 bytes, at most the NIC's path_mtu(). Misuse: as connect's, and any
    /// other MTU.
    result<void> connect(const endpoint& e, std::uint32_t path_mtu_bytes);

    /// SEND of the `n` bytes at `at` of `r` to the peer, which lands them in its oldest receive:
    /// one entry and its doorbell.
    ///
    /// `tag`: the caller's, handed back with the entry's completion when the queue pair belongs
    /// to a completion group (rig/group.hpp). `sig` (send-side forms): signaled::no posts an
    /// unsignalled entry, whose success poll and the group do not hand out (completed by the next
    /// signalled entry of the ring), and whose failure they do (rig/completion.hpp).
    void send(const region& r, std::size_t at, std::size_t n, std::uint64_t tag = 0, signaled sig = signaled::yes);
    /// A receive of up to `n` bytes at `at` of `r`, which the peer's next SEND fills (a longer
    /// SEND fails both queue pairs).
    void receive(const region& r, std::size_t at, std::size_t n, std::uint64_t tag = 0);
    /// RDMA WRITE of the `n` bytes at `at` of `r` to the peer's memory at `to`.
    void write(const region& r, std::size_t at, std::size_t n, const remote& to, std::uint64_t tag = 0,
               signaled sig = signaled::yes);
    /// With immediate data: the message carries `immediate` (32 bits, host order), and the
    /// peer's oldest receive completes with it (completion::immediate, op receive for a SEND,
    /// write_imm for a WRITE: its bytes at `to`, the receive's buffers untouched). Either consumes
    /// a receive of the peer: none posted is a receiver-not-ready wait, as for SEND.
    void send_imm(const region& r, std::size_t at, std::size_t n, std::uint32_t immediate, std::uint64_t tag = 0,
                  signaled sig = signaled::yes);
    /// RDMA WRITE with immediate data (send_imm above).
    void write_imm(const region& r, std::size_t at, std::size_t n, const remote& to, std::uint32_t immediate,
                   std::uint64_t tag = 0, signaled sig = signaled::yes);
    /// RDMA WRITE of `bytes`, carried in the entry itself: at most max_inline() bytes
    void write_inline(std::span<const std::byte> bytes, const remote& to, std::uint64_t tag = 0,
                      signaled sig = signaled::yes);
    /// RDMA READ of the `n` bytes at the peer's `from` into `at` of `r`.
    void read(const remote& from, const region& r, std::size_t at, std::size_t n, std::uint64_t tag = 0,
              signaled sig = signaled::yes);
    /// The seed's read: `n` bytes at offset `i` of region `src` into `dst` at `at`, where `src` is
    /// a region of this queue pair's NIC and the queue pair's peer is a queue pair of that NIC
    /// (it reads through the peer, which holds `src`'s key). Misuse, besides read's: `src` not of
    /// this NIC or deregistered, bytes i..i+n outside `src`, the peer not a queue pair of this NIC.
    void read(const region& src, std::size_t i, const region& dst, std::size_t at, std::size_t n,
              std::uint64_t tag = 0, signaled sig = signaled::yes);

    /// send()'s entry without its doorbell: ring(side::send) rings for every entry posted since
    /// the last ring (batching). The same for each post_ form below.
    void post_send(const region& r, std::size_t at, std::size_t n, std::uint64_t tag = 0, signaled sig = signaled::yes);
    /// receive()'s entry without its doorbell (ring(side::receive)).
    void post_receive(const region& r, std::size_t at, std::size_t n, std::uint64_t tag = 0);
    /// write()'s entry without its doorbell.
    void post_write(const region& r, std::size_t at, std::size_t n, const remote& to, std::uint64_t tag = 0,
                    signaled sig = signaled::yes);
    /// send_imm()'s entry without its doorbell.
    void post_send_imm(const region& r, std::size_t at, std::size_t n, std::uint32_t immediate, std::uint64_t tag = 0,
                       signaled sig = signaled::yes);
    /// write_imm()'s entry without its doorbell.
    void post_write_imm(const region& r, std::size_t at, std::size_t n, const remote& to, std::uint32_t immediate,
                        std::uint64_t tag = 0, signaled sig = signaled::yes);
    /// write_inline()'s entry without its doorbell.
    void post_write_inline(std::span<const std::byte> bytes, const remote& to, std::uint64_t tag = 0,
                           signaled sig = signaled::yes);
    /// read()'s entry without its doorbell.
    void post_read(const remote& from, const region& r, std::size_t at, std::size_t n, std::uint64_t tag = 0,
                   signaled sig = signaled::yes);
    /// The seed's read()'s entry without its doorbell.
    void post_read(const region& src, std::size_t i, const region& dst, std::size_t at, std::size_t n,
                   std::uint64_t tag = 0, signaled sig = signaled::yes);
    /// RDMA WRITE of each entry of `batch`, every one from region `r`, then one doorbell. Every
    /// entry is checked before any is written (misuse as write()'s, and no room for the whole
    /// batch): a refused batch posts none of its entries, the ring and its room as they were
    /// (std::invalid_argument, naming the entry). Entries complete in order, one result each
    /// (unsignalled ones as write()'s). An empty batch posts nothing and rings no doorbell.
    void write(const region& r, std::span<const write_entry> batch);
    /// write()'s batch without its doorbell: ring(side::send) rings for it (and for every entry
    /// posted since the last ring).
    void post_write(const region& r, std::span<const write_entry> batch);
    /// Tells the NIC, with one doorbell, about every entry of ring `s` posted since the last ring.
    void ring(side s);

    /// The most inline bytes one entry takes on this queue pair's NIC (mlx5 28, bnxt 96: static
    /// WQE mode's BNXT_RE_MAX_INLINE_SIZE).
    std::size_t max_inline() const;

    /// How many more entries the ring takes.
    std::uint32_t room(side s) const;
    /// The oldest due entry's result: Ok(bytes moved), an error if it or the queue pair failed,
    /// nothing if it has no completion yet or no entry is due. Sends the firmware nothing.
    std::optional<result<std::uint32_t>> poll(side s);
    /// poll once the oldest due entry has a completion, waiting at most `bound`; nothing at the
    /// bound. Spins briefly, then sleeps between looks. Misuse: bound < 0 or no entry due.
    std::optional<result<std::uint32_t>> wait(side s, std::chrono::microseconds bound);

    /// Once Ok, the NIC runs none of its entries and writes no memory for it. Error if the
    /// firmware refuses: the queue pair counts as destroyed all the same, and its rings stay
    /// allocated until the NIC's close(). Misuse if already destroyed.
    result<void> destroy();

    /// The firmware's view of the queue pair (mlx5 QUERY_QP, bnxt QUERY_QP): state, peer, PSNs,
    /// retry settings. A control call for tests and diagnostics (it sends a command; poll and
    /// wait never do).
    result<qp_info> query() const;

private:
    friend class nic;
    friend struct detail::bench_access;
    queue_pair(rig::nic* n, detail::qp_state* s) noexcept : handle(n, s) {}
    detail::qp_state& live(const char* call) const;
    detail::qp_state& ready(const char* call) const;  // live and connected
    void check_local(const region& r, std::size_t at, std::size_t n, const char* call) const;
    void check_region(const region& r, const char* call) const;
};

}  // namespace rig
