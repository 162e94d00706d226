#pragma once
// Send-queue work entries of a ConnectX (mlx5) RC queue pair, one 64-byte basic block each
// (seeds/rig_mlx5_abi_entry.txt). Layout, reference/mlx5.md §4.3 and rdma-core's mlx5dv.h:
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
// Every entry fits one block, so no entry wraps around the end of the ring.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
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

using op = std::variant<write_op, write_inline_op, read_op, send_op>;

struct entry {
    abi::op op;
    bool signal;   // completion on success too; a failed entry always gets one
};

// Send opcodes (ctrl opcode byte; reference §4.3, mlx5dv.h MLX5_OPCODE_*).
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
inline constexpr std::int64_t max_length = (std::int64_t{1} << 31) - 1;
inline constexpr std::int64_t max_key = (std::int64_t{1} << 32) - 1;

namespace detail {

[[noreturn]] void refuse(const char* what, std::int64_t value);   // entry.cpp
[[noreturn]] void refuse_place(std::size_t at, std::size_t size, std::size_t unit);
[[noreturn]] void refuse_inline(std::size_t bytes);
void check(const local& l);    // throw naming the first bad value, in entry.cpp
void check(const remote& r);
// The values travel as scalars: g++ builds an aggregate argument (or the object a reference
// names) in memory before the branch that leads to the call, which puts a dozen stack stores on
// every entry's hot path; scalar arguments are only moved into place inside the cold branch.
[[noreturn, gnu::cold]] void refuse_entry(std::size_t at, std::size_t size, std::int64_t qp,
                                          std::int64_t index, std::int64_t l_address,
                                          std::int64_t l_bytes, std::int64_t l_key,
                                          std::int64_t r_address, std::int64_t r_key,
                                          std::size_t inline_bytes, bool check_local);

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
inline bool valid(const remote& r) noexcept { return (r.address >= 0) & valid_key(r.key); }

// The block is written as eight 64-bit stores straight into the ring, each word composed in a
// register: no read-back, and no wide load of narrower stores (a block built on the stack and
// copied with one memcpy costs a store-forwarding stall per entry, ~6x slower here; reference/
// perftest-and-performance.md §2.4 saw the same effect). Every word of the block is stored,
// the unused ones as zero. Callers validate everything before the first store.
struct block {
    std::byte* p;

    void put(std::size_t word, std::uint64_t v) const noexcept { std::memcpy(p + word * 8, &v, 8); }
    void zero(std::size_t from_word) const noexcept {
        for (std::size_t w = from_word; w < 8; ++w) {
            put(w, 0);
        }
    }
    void ctrl(std::uint32_t index, send_opcode opc, std::uint32_t qpn, std::uint32_t ds,
              bool signal) const noexcept {
        const std::uint32_t w0 = ((index & 0xffffu) << 8) | static_cast<std::uint32_t>(opc);
        const std::uint32_t w1 = (qpn << 8) | ds;
        put(0, lo_hi(to_be32(w0), to_be32(w1)));
        // byte 8 signature 0, bytes 9..10 stream id 0, byte 11 fm_ce_se, bytes 12..15 imm 0
        put(1, lo_hi(to_be32(signal ? ctrl_cq_update : 0u), 0));
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
                 send_opcode opc, const local& l, const remote& r, bool signal) {
    const slot s(b, at, qp, index);
    if (!(s.ok & valid(l) & valid(r))) [[unlikely]] {
        refuse_entry(at, b.size(), qp, index, l.address, l.bytes, l.key, r.address, r.key, 0, true);
    }
    const block w{s.p};
    const bool has_data = l.bytes != 0;
    w.ctrl(s.idx, opc, s.qpn, has_data ? 3 : 2, signal);
    w.raddr(1, r);
    if (has_data) {
        w.data(2, l);
    }
    w.zero(has_data ? 6 : 4);
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
    const detail::slot s(b, at, qp, index);
    if (!(s.ok & detail::valid(o.src))) [[unlikely]] {
        detail::refuse_entry(at, b.size(), qp, index, o.src.address, o.src.bytes, o.src.key, 0, 0,
                             0, true);
    }
    const detail::block w{s.p};
    const bool has_data = o.src.bytes != 0;
    w.ctrl(s.idx, send_opcode::send, s.qpn, has_data ? 2 : 1, signal);
    if (has_data) {
        w.data(1, o.src);
    }
    w.zero(has_data ? 4 : 2);
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
inline void write(std::span<std::byte> b, std::size_t at, std::int64_t qp, std::int64_t index,
                  const entry& e) {
    std::visit([&](const auto& o) { write(b, at, qp, index, o, e.signal); }, e.op);
}

// ---- receive entries --------------------------------------------------------------------------

// A receive entry is a list of scatter entries (data segments) in a slot of `stride` bytes
// (16 << qpc.log_rq_stride). A list shorter than the slot ends with a segment of byte_count 0
// and the invalid lkey 0x100 (reference §4.4); zero-length elements are skipped as on send.
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
        detail::check(l);
        used += l.bytes != 0 ? 1 : 0;
    }
    if (used * scatter_size > stride) [[unlikely]] {
        detail::refuse("scatter entries", static_cast<std::int64_t>(used));
    }
    std::byte* p = b.data() + at;
    std::memset(p, 0, stride);
    for (const local& l : scatter) {
        if (l.bytes == 0) {
            continue;
        }
        store_be<std::uint32_t>(p, static_cast<std::uint32_t>(l.bytes));
        store_be<std::uint32_t>(p + 4, static_cast<std::uint32_t>(l.key));
        store_be<std::uint64_t>(p + 8, static_cast<std::uint64_t>(l.address));
        p += scatter_size;
    }
    if (used * scatter_size < stride) {
        store_be<std::uint32_t>(p + 4, invalid_lkey);   // byte_count 0, addr 0: end of list
    }
}

}  // namespace rig::mlx5::abi
