#pragma once
// Send-queue work entries of a ConnectX (mlx5) RC queue pair, one 64-byte basic block each
// (the contract: test/unit/mlx5_wqe/). Layout, rdma-core's mlx5dv.h and providers/mlx5/qp.c:
//
//   control segment  16 B  opmod_idx_opcode = be32(index[15:0] << 8 | opcode)
//                          qpn_ds           = be32(qp << 8 | ds), ds = entry size in 16-byte units
//                          signature, dci_stream_channel_id (0 for RC), fm_ce_se, imm
//   remote address   16 B  raddr be64, rkey be32, reserved             (WRITE, READ)
//   data pointer     16 B  byte_count be32, lkey be32, addr be64       (WRITE, READ, SEND)
//   inline data      4 B + payload: byte_count = be32(len | MLX5_INLINE_SEG), padded to 16 B
//
// A zero-length gather/scatter element gets no data segment: mlx5 hardware reads a data
// segment's byte_count of 0 as 2^31 bytes, which is why rdma-core's and the kernel's post paths
// skip zero-length elements (providers/mlx5/qp.c, drivers/infiniband/hw/mlx5/wr.c).
//
// A message of exactly 2^31 bytes (the seed's largest) does not fit one data segment: byte_count
// holds at most 2^31 - 1 (bit 31 is MLX5_INLINE_SEG). The typed writers below take a length in
// [0, 2^31] (max_message) and write a 2^31-byte local side as two segments of 2^30 bytes each,
// at address and address + 2^30: the halves keep the first one's alignment (a page-aligned
// buffer gives two page-aligned DMA reads, where 2^31 - 1 + 1 would end on a 1-byte read at an
// odd address), and ds grows by one. WRITE/READ: 16 + 16 + 2 x 16 = 64, SEND 48: still one block.
// The generic write(entry) keeps the encoder's contract (test/unit/mlx5_wqe/
// entry_refusal_test.cpp): a length is refused outside [0, 2^31 - 1], one element is one segment.
//
// Every entry fits one block, so no entry wraps around the end of the ring.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <type_traits>
#include <variant>

#include "abi/bits.hpp"

namespace rig::mlx5::abi {

using ::rig::abi::store_be;
using ::rig::abi::to_be32;
using ::rig::abi::to_be64;

inline constexpr std::size_t entry_size = 64;   // one basic block (MLX5_SEND_WQE_BB)
inline constexpr std::size_t max_inline = 28;   // 64 - ctrl 16 - raddr 16 - inline header 4

struct local { std::int64_t address, bytes, key; };
struct remote { std::int64_t address, key; };

struct write_op        { local src; remote dst; };
struct write_inline_op { std::string_view data; remote dst; };
struct read_op         { remote src; local dst; };
struct send_op         { local src; };
// With immediate data (IB spec 9.3.7): the ctrl segment's imm word carries it, big-endian as
// the wire does; the peer's receive completes with it (RESP_SEND_IMM, RESP_WR_IMM). Not in
// `op`: the seed's generic writer takes the four operations above.
struct write_imm_op    { local src; remote dst; std::uint32_t immediate; };
struct send_imm_op     { local src; std::uint32_t immediate; };

using op = std::variant<write_op, write_inline_op, read_op, send_op>;

struct entry {
    abi::op op;
    bool signal;   // completion on success too; a failed entry always gets one
};

// Send opcodes (ctrl opcode byte; mlx5dv.h MLX5_OPCODE_*).
enum class send_opcode : std::uint8_t {
    nop = 0x00,
    rdma_write = 0x08,
    rdma_write_imm = 0x09,
    send = 0x0a,
    send_imm = 0x0b,
    rdma_read = 0x10,
    atomic_cs = 0x11,
    atomic_fa = 0x12,
};

// fm_ce_se byte: CE = 2 asks for a completion entry on success as well (MLX5_WQE_CTRL_CQ_UPDATE);
// CE = 0 gives one only on error.
inline constexpr std::uint8_t ctrl_cq_update = 0x08;
inline constexpr std::uint8_t ctrl_solicited = 0x02;
inline constexpr std::uint8_t ctrl_fence = 0x80;
inline constexpr std::uint32_t inline_seg_flag = 0x80000000u;   // MLX5_INLINE_SEG
inline constexpr std::uint32_t invalid_lkey = 0x100;            // MLX5_INVALID_LKEY

inline constexpr std::int64_t max_qp = (std::int64_t{1} << 24) - 1;
inline constexpr std::int64_t max_length = (std::int64_t{1} << 31) - 1;   // one data segment
inline constexpr std::int64_t max_message = std::int64_t{1} << 31;          // typed writers: two
inline constexpr std::int64_t half_message = max_message / 2;               // each of the two
inline constexpr std::int64_t max_key = (std::int64_t{1} << 32) - 1;

namespace detail {

[[noreturn]] void refuse(const char* what, std::int64_t value);   // entry.cpp
[[noreturn]] void refuse_place(std::size_t at, std::size_t size, std::size_t unit);
[[noreturn]] void refuse_inline(std::size_t bytes);
// Throw naming the first bad value, in entry.cpp; `length_limit` is max_length (one segment,
// the seed's generic writer) or max_message (the typed writers and the receive writer).
void check(const local& l, std::int64_t length_limit = max_length);
void check(const remote& r);
// The values travel as scalars: g++ builds an aggregate argument (or the object a reference
// names) in memory before the branch that leads to the call, which puts a dozen stack stores on
// every entry's hot path; scalar arguments are only moved into place inside the cold branch.
[[noreturn, gnu::cold]] void refuse_entry(std::size_t at, std::size_t size, std::int64_t qp,
                                          std::int64_t index, std::int64_t l_address,
                                          std::int64_t l_bytes, std::int64_t l_key,
                                          std::int64_t r_address, std::int64_t r_key,
                                          std::size_t inline_bytes, bool check_local,
                                          std::int64_t length_limit = max_length);

// Validity as one predicate without branches: the hot path takes one well-predicted branch per
// entry, and only a refused entry pays for finding which value was wrong (refuse_entry).
// Unsigned compares fold "negative" into "too large".
inline bool valid_length(std::int64_t n) noexcept {
    return static_cast<std::uint64_t>(n) <= static_cast<std::uint64_t>(max_length);
}
inline bool valid_key(std::int64_t k) noexcept {
    return static_cast<std::uint64_t>(k) <= static_cast<std::uint64_t>(max_key);
}
inline bool valid(const local& l) noexcept {
    return (l.address >= 0) & valid_length(l.bytes) & valid_key(l.key);
}
// The typed writers' local side: up to 2^31 bytes (two segments at 2^31).
inline bool valid_message(const local& l) noexcept {
    return (l.address >= 0) &
           (static_cast<std::uint64_t>(l.bytes) <= static_cast<std::uint64_t>(max_message)) &
           valid_key(l.key);
}
inline bool valid(const remote& r) noexcept { return (r.address >= 0) & valid_key(r.key); }

// The block is written as eight 64-bit stores straight into the ring, each word composed in a
// register: no read-back, and no wide load of narrower stores (a block built on the stack and
// copied with one memcpy costs a store-forwarding stall per entry, ~6x slower here). Every word of
// the block is stored, the unused ones as zero. Callers validate everything before the first store.
struct block {
    std::byte* p;

    void put(std::size_t word, std::uint64_t v) const noexcept { std::memcpy(p + word * 8, &v, 8); }
    void zero(std::size_t from_word) const noexcept {
        for (std::size_t w = from_word; w < 8; ++w) {
            put(w, 0);
        }
    }
    void ctrl(std::uint32_t index, send_opcode opc, std::uint32_t qpn, std::uint32_t ds,
              bool signal, std::uint32_t immediate = 0) const noexcept {
        const std::uint32_t w0 = ((index & 0xffffu) << 8) | static_cast<std::uint32_t>(opc);
        const std::uint32_t w1 = (qpn << 8) | ds;
        put(0, lo_hi(to_be32(w0), to_be32(w1)));
        // byte 8 signature 0, bytes 9..10 stream id 0, byte 11 fm_ce_se, bytes 12..15 imm
        put(1, lo_hi(to_be32(signal ? ctrl_cq_update : 0u), to_be32(immediate)));
    }
    void raddr(std::size_t seg, const remote& r) const noexcept {
        put(seg * 2, to_be64(static_cast<std::uint64_t>(r.address)));
        put(seg * 2 + 1, lo_hi(to_be32(static_cast<std::uint32_t>(r.key)), 0));
    }
    void data(std::size_t seg, const local& l) const noexcept {
        put(seg * 2, lo_hi(to_be32(static_cast<std::uint32_t>(l.bytes)),
                           to_be32(static_cast<std::uint32_t>(l.key))));
        put(seg * 2 + 1, to_be64(static_cast<std::uint64_t>(l.address)));
    }
    // The local side from segment `seg` on: none for 0 bytes, one below 2^31, two halves at 2^31
    // (header comment). Returns the segments written. The two-segment case is out of the way of
    // the one-segment path (bench-post); the second address is summed in 64 unsigned bits, where
    // a non-negative address plus 2^30 cannot wrap.
    std::uint32_t local_side(std::size_t seg, const local& l) const noexcept {
        if (l.bytes == max_message) [[unlikely]] {
            const auto a = static_cast<std::uint64_t>(l.address);
            data(seg, local{l.address, half_message, l.key});
            put((seg + 1) * 2, lo_hi(to_be32(static_cast<std::uint32_t>(half_message)),
                                     to_be32(static_cast<std::uint32_t>(l.key))));
            put((seg + 1) * 2 + 1, to_be64(a + static_cast<std::uint64_t>(half_message)));
            return 2;
        }
        if (l.bytes != 0) {
            data(seg, l);
            return 1;
        }
        return 0;
    }
    // the word whose bytes sit first in memory goes in the low half on a little-endian host
    static constexpr std::uint64_t lo_hi(std::uint32_t first, std::uint32_t second) noexcept {
        if constexpr (std::endian::native == std::endian::little) {
            return std::uint64_t{first} | (std::uint64_t{second} << 32);
        } else {
            return (std::uint64_t{first} << 32) | std::uint64_t{second};
        }
    }
};

}  // namespace detail

namespace detail {

// Where an entry goes, checked without branches; the typed writers add their own values.
struct slot {
    std::byte* p;
    bool ok;                 // at, qp and index are all acceptable
    std::uint32_t qpn, idx;

    slot(std::span<std::byte> b, std::size_t at, std::int64_t qp, std::int64_t index) noexcept
        : p(b.data() + at),
          ok((at % entry_size == 0) & (at <= b.size()) & (b.size() - at >= entry_size) &
             (static_cast<std::uint64_t>(qp) <= static_cast<std::uint64_t>(max_qp)) & (index >= 0)),
          qpn(static_cast<std::uint32_t>(qp)),
          idx(static_cast<std::uint32_t>(index & 0xffff)) {}
};

}  // namespace detail

// The typed writers: what the queue-pair post path calls, one per operation. Same contract as
// write(entry) below.
namespace detail {
// RDMA WRITE and READ share one shape: ctrl, remote address, data segment (the local side: a
// WRITE's source, a READ's destination). The typed writers are always_inline: in a caller's
// post loop (qp/mlx5's send_queue) g++ otherwise may keep them calls, 2-3x the entry's cost
// (bench-post); flatten on the caller alone proved fickle.
[[gnu::always_inline]] inline void rdma(std::span<std::byte> b, std::size_t at, std::int64_t qp, std::int64_t index,
                 send_opcode opc, const local& l, const remote& r, bool signal, std::uint32_t immediate = 0) {
    const slot s(b, at, qp, index);
    if (!(s.ok & valid_message(l) & valid(r))) [[unlikely]] {
        refuse_entry(at, b.size(), qp, index, l.address, l.bytes, l.key, r.address, r.key, 0, true,
                     max_message);
    }
    const block w{s.p};
    w.raddr(1, r);
    // one data segment, the common entry: straight-line stores (the zeroing below, with its
    // start known only at run time, compiles to a loop; bench-post)
    if (l.bytes != 0 && l.bytes != max_message) [[likely]] {
        w.data(2, l);
        w.ctrl(s.idx, opc, s.qpn, 3, signal, immediate);
        w.put(6, 0);
        w.put(7, 0);
        return;
    }
    const std::uint32_t segs = w.local_side(2, l);
    w.ctrl(s.idx, opc, s.qpn, 2 + segs, signal, immediate);
    w.zero(4 + 2 * segs);
}

[[gnu::always_inline]] inline void send(std::span<std::byte> b, std::size_t at, std::int64_t qp, std::int64_t index,
                                        send_opcode opc, const local& l, bool signal, std::uint32_t immediate = 0) {
    const slot s(b, at, qp, index);
    if (!(s.ok & valid_message(l))) [[unlikely]] {
        refuse_entry(at, b.size(), qp, index, l.address, l.bytes, l.key, 0, 0, 0, true, max_message);
    }
    const block w{s.p};
    if (l.bytes != 0 && l.bytes != max_message) [[likely]] {   // one data segment (rdma above)
        w.data(1, l);
        w.ctrl(s.idx, opc, s.qpn, 2, signal, immediate);
        w.zero(4);
        return;
    }
    const std::uint32_t segs = w.local_side(1, l);
    w.ctrl(s.idx, opc, s.qpn, 1 + segs, signal, immediate);
    w.zero(2 + 2 * segs);
}
}  // namespace detail

[[gnu::always_inline]] inline void write(std::span<std::byte> b, std::size_t at, std::int64_t qp, std::int64_t index,
                  const write_op& o, bool signal) {
    detail::rdma(b, at, qp, index, send_opcode::rdma_write, o.src, o.dst, signal);
}

[[gnu::always_inline]] inline void write(std::span<std::byte> b, std::size_t at, std::int64_t qp, std::int64_t index,
                  const read_op& o, bool signal) {
    detail::rdma(b, at, qp, index, send_opcode::rdma_read, o.dst, o.src, signal);
}

[[gnu::always_inline]] inline void write(std::span<std::byte> b, std::size_t at, std::int64_t qp, std::int64_t index,
                  const send_op& o, bool signal) {
    detail::send(b, at, qp, index, send_opcode::send, o.src, signal);
}

[[gnu::always_inline]] inline void write(std::span<std::byte> b, std::size_t at, std::int64_t qp, std::int64_t index,
                  const write_imm_op& o, bool signal) {
    detail::rdma(b, at, qp, index, send_opcode::rdma_write_imm, o.src, o.dst, signal, o.immediate);
}

[[gnu::always_inline]] inline void write(std::span<std::byte> b, std::size_t at, std::int64_t qp, std::int64_t index,
                  const send_imm_op& o, bool signal) {
    detail::send(b, at, qp, index, send_opcode::send_imm, o.src, signal, o.immediate);
}

[[gnu::always_inline]] inline void write(std::span<std::byte> b, std::size_t at, std::int64_t qp, std::int64_t index,
                  const write_inline_op& o, bool signal) {
    const detail::slot s(b, at, qp, index);
    if (!(s.ok & (o.data.size() <= max_inline) & detail::valid(o.dst))) [[unlikely]] {
        detail::refuse_entry(at, b.size(), qp, index, 0, 0, 0, o.dst.address, o.dst.key,
                             o.data.size(), false);
    }
    const detail::block w{s.p};
    const auto n = static_cast<std::uint32_t>(o.data.size());
    // inline segment: 4-byte header + payload, rounded up to whole 16-byte units
    const std::uint32_t inline_ds = (4 + n + 15) / 16;
    w.ctrl(s.idx, send_opcode::rdma_write, s.qpn, 2 + inline_ds, signal);
    w.raddr(1, o.dst);
    w.zero(4);
    store_be<std::uint32_t>(s.p + 32, n | inline_seg_flag);
    std::memcpy(s.p + 36, o.data.data(), n);
}

// Writes e in the 64 bytes of b at byte `at`, as entry number `index` (the ring's producer
// count before the entry; the NIC reads its low 16 bits) of queue pair number `qp`.
// Refusals throw std::invalid_argument naming the bad value, before any byte of b is written.
// The seed's limit holds here: a length of 2^31, which the typed writers take as two segments,
// is refused as any other length outside [0, 2^31 - 1], after the checks the seed lists first.
inline void write(std::span<std::byte> b, std::size_t at, std::int64_t qp, std::int64_t index,
                  const entry& e) {
    std::visit([&](const auto& o) {
        using O = std::decay_t<decltype(o)>;
        if constexpr (!std::is_same_v<O, write_inline_op>) {
            const local& l = [&]() -> const local& {
                if constexpr (std::is_same_v<O, read_op>) {
                    return o.dst;
                } else {
                    return o.src;
                }
            }();
            if (l.bytes == max_message) [[unlikely]] {
                remote r{};
                if constexpr (std::is_same_v<O, write_op>) {
                    r = o.dst;
                } else if constexpr (std::is_same_v<O, read_op>) {
                    r = o.src;
                }
                detail::refuse_entry(at, b.size(), qp, index, l.address, l.bytes, l.key, r.address,
                                     r.key, 0, true, max_length);
            }
        }
        write(b, at, qp, index, o, e.signal);
    }, e.op);
}

// ---- receive entries --------------------------------------------------------------------------

// A receive entry is a list of scatter entries (data segments) in a slot of `stride` bytes
// (16 << qpc.log_rq_stride). A list shorter than the slot ends with a segment of byte_count 0
// and the invalid lkey 0x100 (MLX5_INVALID_LKEY, rdma-core providers/mlx5/qp.c mlx5_post_recv);
// zero-length elements are skipped as on send.
// An element takes [0, 2^31] bytes as the typed send writers do: 2^31 is two segments of 2^30
// (header comment), so a queue whose receives may take 2^31 needs a slot of 32 bytes or more.
inline constexpr std::size_t scatter_size = 16;

inline void write_receive(std::span<std::byte> b, std::size_t at, std::size_t stride,
                          std::span<const local> scatter) {
    if (stride < scatter_size || (stride & (stride - 1)) != 0) [[unlikely]] {
        detail::refuse("receive stride", static_cast<std::int64_t>(stride));
    }
    if (at % stride != 0 || at > b.size() || b.size() - at < stride) [[unlikely]] {
        detail::refuse_place(at, b.size(), stride);
    }
    std::size_t used = 0;
    for (const local& l : scatter) {
        detail::check(l, max_message);
        used += l.bytes == max_message ? 2 : l.bytes != 0 ? 1 : 0;
    }
    if (used * scatter_size > stride) [[unlikely]] {
        detail::refuse("scatter entries", static_cast<std::int64_t>(used));
    }
    std::byte* p = b.data() + at;
    std::memset(p, 0, stride);
    const auto segment = [&p](std::int64_t bytes, std::int64_t key, std::uint64_t address) {
        store_be<std::uint32_t>(p, static_cast<std::uint32_t>(bytes));
        store_be<std::uint32_t>(p + 4, static_cast<std::uint32_t>(key));
        store_be<std::uint64_t>(p + 8, address);
        p += scatter_size;
    };
    for (const local& l : scatter) {
        const auto a = static_cast<std::uint64_t>(l.address);
        if (l.bytes == max_message) {
            segment(half_message, l.key, a);
            segment(half_message, l.key, a + static_cast<std::uint64_t>(half_message));
        } else if (l.bytes != 0) {
            segment(l.bytes, l.key, a);
        }
    }
    if (used * scatter_size < stride) {
        store_be<std::uint32_t>(p + 4, invalid_lkey);   // byte_count 0, addr 0: end of list
    }
}

}  // namespace rig::mlx5::abi
