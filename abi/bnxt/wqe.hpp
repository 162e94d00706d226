#pragma once
// Send and receive queue entries (WQEs) of a bnxt RC queue pair (kernel
// roce_hsi.h `sq_send_hdr`, `sq_rdma_hdr`, `rq_wqe_hdr`, `sq_sge`).
//
// A queue is a ring of 16-byte slots. An entry is a 32-byte header (2 slots) followed by one
// 16-byte `sq_sge` per scatter/gather element, or by the inline bytes padded to whole slots;
// the header's wqe_size counts the slots used (2 + elements, or 2 + ceil(inline / 16)).
//  - static mode (P5 default): every entry takes 8 slots (128 bytes) whatever wqe_size says, so
//    at most 6 elements or 96 inline bytes; entries start at multiples of 8 slots and never wrap.
//  - variable mode (P7 default): an entry takes exactly wqe_size slots and may wrap around the
//    end of the ring.
// write() puts one entry at slot `at` and returns the slots it took (the producer advance).
// Refusals throw std::invalid_argument naming the bad value, before any byte of the ring is
// written; an accepted write writes exactly its entry's slots, unused bytes zero.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "abi/bnxt/layout.hpp"

namespace rig::bnxt::abi {

// ---- constants ---------------------------------------------------------------------------------

inline constexpr std::size_t wqe_slot_size = 16;
inline constexpr std::size_t static_wqe_slots = 8;            // 128-byte static WQE
inline constexpr std::size_t static_max_sge = 6;              // BNXT_RE_STATIC_WQE_MAX_SGE
inline constexpr std::size_t static_max_inline = 96;          // BNXT_RE_MAX_INLINE_SIZE
inline constexpr std::size_t max_wqe_slots = 0xff;            // wqe_size is one byte
inline constexpr std::int64_t max_length = std::int64_t{1} << 31;   // docs/guide.md: a message
inline constexpr std::int64_t max_key = (std::int64_t{1} << 32) - 1;
inline constexpr std::int64_t max_wr_id = (std::int64_t{1} << 20) - 1;  // RQ_WQE_HDR_WR_ID_MASK

// sq_base.wqe_type
inline constexpr std::uint8_t SQ_BASE_WQE_TYPE_SEND = 0x0;
inline constexpr std::uint8_t SQ_BASE_WQE_TYPE_SEND_W_IMMEAD = 0x1;
inline constexpr std::uint8_t SQ_BASE_WQE_TYPE_SEND_W_INVALID = 0x2;
inline constexpr std::uint8_t SQ_BASE_WQE_TYPE_WRITE_WQE = 0x4;
inline constexpr std::uint8_t SQ_BASE_WQE_TYPE_WRITE_W_IMMEAD = 0x5;
inline constexpr std::uint8_t SQ_BASE_WQE_TYPE_READ_WQE = 0x6;
inline constexpr std::uint8_t SQ_BASE_WQE_TYPE_ATOMIC_CS = 0x8;
inline constexpr std::uint8_t SQ_BASE_WQE_TYPE_ATOMIC_FA = 0xb;
inline constexpr std::uint8_t SQ_BASE_WQE_TYPE_LOCAL_INVALID = 0xc;
inline constexpr std::uint8_t SQ_BASE_WQE_TYPE_FR_PMR = 0xd;
inline constexpr std::uint8_t SQ_BASE_WQE_TYPE_BIND = 0xe;
inline constexpr std::uint8_t SQ_BASE_WQE_TYPE_FR_PPMR = 0xf;
inline constexpr std::uint8_t RQ_WQE_HDR_WQE_TYPE_RCV = 0x80;

// sq_send_hdr.flags / sq_rdma_hdr.flags
inline constexpr std::uint8_t SQ_SEND_HDR_FLAGS_SIGNAL_COMP = 0x1;
inline constexpr std::uint8_t SQ_SEND_HDR_FLAGS_RD_OR_ATOMIC_FENCE = 0x2;
inline constexpr std::uint8_t SQ_SEND_HDR_FLAGS_UC_FENCE = 0x4;
inline constexpr std::uint8_t SQ_SEND_HDR_FLAGS_SE = 0x8;
inline constexpr std::uint8_t SQ_SEND_HDR_FLAGS_INLINE = 0x10;
inline constexpr std::uint8_t SQ_SEND_HDR_FLAGS_WQE_TS_EN = 0x20;
inline constexpr std::uint8_t SQ_SEND_HDR_FLAGS_DEBUG_TRACE = 0x40;

// ---- layouts ------------------------------------------------------------------------------------

#define RIG_BNXT_SQ_SGE(W, D, F, A)                                \
    W(va_or_pa, std::uint64_t, 0)                                  \
    W(l_key, std::uint32_t, 8)                                     \
    W(size, std::uint32_t, 12)
RIG_BNXT_LAYOUT(sq_sge, 16, RIG_BNXT_SQ_SGE);

#define RIG_BNXT_SQ_SEND_HDR(W, D, F, A)                           \
    W(wqe_type, std::uint8_t, 0)                                   \
    W(flags, std::uint8_t, 1)                                      \
    W(wqe_size, std::uint8_t, 2)                                   \
    W(inv_key_or_imm_data, std::uint32_t, 4)                       \
    W(length, std::uint32_t, 8)                                    \
    W(q_key, std::uint32_t, 12)                                    \
    F(dst_qp, std::uint32_t, 16, 0x00ffffff, 0)                    \
    F(avid, std::uint32_t, 20, 0x000fffff, 0)                      \
    F(timestamp, std::uint32_t, 28, 0x00ffffff, 0)
RIG_BNXT_LAYOUT(sq_send_hdr, 32, RIG_BNXT_SQ_SEND_HDR);

#define RIG_BNXT_SQ_RDMA_HDR(W, D, F, A)                           \
    W(wqe_type, std::uint8_t, 0)                                   \
    W(flags, std::uint8_t, 1)                                      \
    W(wqe_size, std::uint8_t, 2)                                   \
    W(imm_data, std::uint32_t, 4)                                  \
    W(length, std::uint32_t, 8)                                    \
    W(remote_va, std::uint64_t, 16)                                \
    W(remote_key, std::uint32_t, 24)                               \
    F(timestamp, std::uint32_t, 28, 0x00ffffff, 0)
RIG_BNXT_LAYOUT(sq_rdma_hdr, 32, RIG_BNXT_SQ_RDMA_HDR);

// wr_id: the driver's 20-bit tag, returned in the CQE's srq_or_rq_wr_id.
#define RIG_BNXT_RQ_WQE_HDR(W, D, F, A)                            \
    D(wqe_type, std::uint8_t, 0, RQ_WQE_HDR_WQE_TYPE_RCV)          \
    W(flags, std::uint8_t, 1)                                      \
    W(wqe_size, std::uint8_t, 2)                                   \
    F(wr_id, std::uint32_t, 8, 0x000fffff, 0)
RIG_BNXT_LAYOUT(rq_wqe_hdr, 32, RIG_BNXT_RQ_WQE_HDR);

// Retransmission metadata the driver keeps next to the SQ (roce_hsi.h sq_psn_search_ext): one
// sq_psn_search_ext per WQE on P5, one sq_msn_search per message with the P7 host MSN table.
#define RIG_BNXT_SQ_PSN_SEARCH_EXT(W, D, F, A)                     \
    F(start_psn, std::uint32_t, 0, 0x00ffffff, 0)                  \
    F(opcode, std::uint32_t, 0, 0xff000000, 24)                    \
    F(next_psn, std::uint32_t, 4, 0x00ffffff, 0)                   \
    F(flags, std::uint32_t, 4, 0xff000000, 24)                     \
    W(start_slot_idx, std::uint16_t, 8)
RIG_BNXT_LAYOUT(sq_psn_search_ext, 16, RIG_BNXT_SQ_PSN_SEARCH_EXT);

#define RIG_BNXT_SQ_MSN_SEARCH(W, D, F, A)                         \
    F(start_psn, std::uint64_t, 0, 0x0000000000ffffffull, 0)       \
    F(next_psn, std::uint64_t, 0, 0x0000ffffff000000ull, 24)       \
    F(start_idx, std::uint64_t, 0, 0xffff000000000000ull, 48)
RIG_BNXT_LAYOUT(sq_msn_search, 8, RIG_BNXT_SQ_MSN_SEARCH);

// ---- typed entries ------------------------------------------------------------------------------

// One scatter/gather element: `bytes` at `address` of the region with local key `key`.
struct local {
    std::int64_t address, bytes, key;
};
// The peer's memory: `address` of the region with remote key `key`.
struct remote {
    std::int64_t address, key;
};

struct send_op        { std::span<const local> src; };
struct send_inline_op { std::string_view data; };
struct write_op       { std::span<const local> src; remote dst; };
struct write_inline_op { std::string_view data; remote dst; };
struct read_op        { remote src; std::span<const local> dst; };
// With immediate data (IB spec 9.3.7): the header's immediate field holds the value
// little-endian and the card sends it big-endian (rdma-core bnxt_re_post_send: key_immd =
// htole32(be32toh(imm_data))). Not in `op`, the seed's set.
struct send_imm_op    { std::span<const local> src; std::uint32_t immediate; };
struct write_imm_op   { std::span<const local> src; remote dst; std::uint32_t immediate; };

using op = std::variant<send_op, send_inline_op, write_op, write_inline_op, read_op>;

struct entry {
    abi::op op;
    bool signal;   // SIGNAL_COMP: a completion on success too (errors always complete)
};

struct receive {
    std::span<const local> dst;   // at least one element: the RQ needs one (roce_hsi.h rq_wqe_hdr)
    std::int64_t wr_id;           // 20 bits, comes back in the responder CQE
};

enum class wqe_mode : std::uint8_t { static_128, variable };

namespace detail {

[[noreturn]] inline void refuse(std::string_view what, std::int64_t value) {
    throw std::invalid_argument(std::string(what) + ": value " + std::to_string(value) +
                                " is out of range");
}

inline void check_local(const local& l) {
    if (l.address < 0) refuse("local.address", l.address);
    if (l.bytes < 0 || l.bytes > max_length) refuse("local.bytes", l.bytes);
    if (l.key < 0 || l.key > max_key) refuse("local.key", l.key);
}
inline void check_remote(const remote& r) {
    if (r.address < 0) refuse("remote.address", r.address);
    if (r.key < 0 || r.key > max_key) refuse("remote.key", r.key);
}

// The element list's total length, refused over max_length (the header's length field).
inline std::uint32_t total_length(std::span<const local> sges) {
    std::int64_t total = 0;
    for (const local& l : sges) {
        check_local(l);
        total += l.bytes;
        if (total > max_length) refuse("total length of the elements", total);
    }
    return static_cast<std::uint32_t>(total);
}

// Where the entry goes: refuses a ring that is not whole slots (whole 128-byte entries in
// static mode), `at` outside it or not on an entry boundary, and an entry that does not fit.
// Returns the slots the entry takes in the ring.
inline std::size_t payload_limit(wqe_mode mode) noexcept {
    return mode == wqe_mode::static_128 ? static_wqe_slots - 2 : max_wqe_slots - 2;
}

inline std::size_t check_place(std::span<const std::byte> ring, std::size_t at, wqe_mode mode,
                               std::size_t used_slots) {
    const std::size_t payload_limit_slots = payload_limit(mode);
    const std::size_t unit = mode == wqe_mode::static_128 ? static_wqe_slots * wqe_slot_size
                                                          : wqe_slot_size;
    if (ring.empty() || ring.size() % unit != 0) {
        throw std::invalid_argument("wqe: a ring of " + std::to_string(ring.size()) +
                                    " bytes is not whole " + std::to_string(unit) + "-byte units");
    }
    const std::size_t ring_slots = ring.size() / wqe_slot_size;
    if (at >= ring_slots || (mode == wqe_mode::static_128 && at % static_wqe_slots != 0)) {
        throw std::invalid_argument("wqe: slot " + std::to_string(at) +
                                    " is not an entry's place in a ring of " +
                                    std::to_string(ring_slots) + " slots");
    }
    if (used_slots - 2 > payload_limit_slots) {
        throw std::invalid_argument("wqe: " + std::to_string(used_slots - 2) +
                                    " payload slots, the entry takes at most " +
                                    std::to_string(payload_limit_slots));
    }
    const std::size_t taken = mode == wqe_mode::static_128 ? static_wqe_slots : used_slots;
    if (taken > ring_slots) {
        throw std::invalid_argument("wqe: an entry of " + std::to_string(taken) +
                                    " slots does not fit a ring of " + std::to_string(ring_slots));
    }
    return taken;
}

// Copies `n` bytes into the ring from slot `slot` on, wrapping at the end.
inline void put(std::span<std::byte> ring, std::size_t slot, const std::byte* src,
                std::size_t n) noexcept {
    const std::size_t ring_slots = ring.size() / wqe_slot_size;
    for (std::size_t done = 0; done < n; done += wqe_slot_size, ++slot) {
        std::memcpy(ring.data() + (slot % ring_slots) * wqe_slot_size, src + done,
                    std::min(wqe_slot_size, n - done));
    }
}

// Header, then elements or inline bytes, then zeros up to `taken` slots.
inline void put_entry(std::span<std::byte> ring, std::size_t at, std::size_t taken,
                      const std::array<std::byte, 32>& hdr, std::span<const local> sges,
                      std::string_view inline_data) noexcept {
    const std::size_t ring_slots = ring.size() / wqe_slot_size;
    put(ring, at, hdr.data(), hdr.size());
    std::size_t slot = at + 2;
    for (const local& l : sges) {
        sq_sge s{static_cast<std::uint64_t>(l.address), static_cast<std::uint32_t>(l.key),
                 static_cast<std::uint32_t>(l.bytes)};
        std::array<std::byte, 16> b{};
        encode(std::span<std::byte>(b), s);
        put(ring, slot++, b.data(), b.size());
    }
    if (!inline_data.empty()) {
        put(ring, slot, reinterpret_cast<const std::byte*>(inline_data.data()), inline_data.size());
        if (inline_data.size() % wqe_slot_size != 0) {   // zero the rest of the last slot
            const std::size_t last = (slot + inline_data.size() / wqe_slot_size) % ring_slots;
            const std::size_t tail = inline_data.size() % wqe_slot_size;
            std::memset(ring.data() + last * wqe_slot_size + tail, 0, wqe_slot_size - tail);
        }
        slot += (inline_data.size() + wqe_slot_size - 1) / wqe_slot_size;
    }
    for (; slot < at + taken; ++slot) {
        std::memset(ring.data() + (slot % ring_slots) * wqe_slot_size, 0, wqe_slot_size);
    }
}

inline std::size_t inline_slots(std::string_view data) noexcept {
    return (data.size() + wqe_slot_size - 1) / wqe_slot_size;
}

inline void check_inline(std::string_view data, wqe_mode mode) {
    const std::size_t limit = payload_limit(mode) * wqe_slot_size;
    if (data.size() > limit) {
        throw std::invalid_argument("wqe: " + std::to_string(data.size()) +
                                    " inline bytes, the entry takes at most " +
                                    std::to_string(limit));
    }
}

inline std::array<std::byte, 32> send_header(std::uint8_t flags, std::size_t slots,
                                             std::uint32_t length,
                                             std::uint8_t type = SQ_BASE_WQE_TYPE_SEND,
                                             std::uint32_t immediate = 0) {
    sq_send_hdr h{};
    h.wqe_type = type;
    h.inv_key_or_imm_data = immediate;
    h.flags = flags;
    h.wqe_size = static_cast<std::uint8_t>(slots);
    h.length = length;
    return to_bytes(h);
}

inline std::array<std::byte, 32> rdma_header(std::uint8_t type, std::uint8_t flags,
                                             std::size_t slots, std::uint32_t length,
                                             const remote& r, std::uint32_t immediate = 0) {
    sq_rdma_hdr h{};
    h.wqe_type = type;
    h.imm_data = immediate;
    h.flags = flags;
    h.wqe_size = static_cast<std::uint8_t>(slots);
    h.length = length;
    h.remote_va = static_cast<std::uint64_t>(r.address);
    h.remote_key = static_cast<std::uint32_t>(r.key);
    return to_bytes(h);
}

inline std::uint8_t signal_flag(bool signal) noexcept {
    return signal ? SQ_SEND_HDR_FLAGS_SIGNAL_COMP : 0;
}

}  // namespace detail

// ---- writers ------------------------------------------------------------------------------------

namespace detail {
// SEND (with immediate or not) and RDMA WRITE (with immediate or not) of a list of elements.
inline std::size_t write_send(std::span<std::byte> ring, std::size_t at, wqe_mode mode, std::span<const local> src,
                              bool signal, std::uint8_t type, std::uint32_t immediate) {
    const std::uint32_t length = total_length(src);
    const std::size_t used = 2 + src.size();
    const std::size_t taken = check_place(ring, at, mode, used);
    put_entry(ring, at, taken, send_header(signal_flag(signal), used, length, type, immediate), src, {});
    return taken;
}
inline std::size_t write_rdma_write(std::span<std::byte> ring, std::size_t at, wqe_mode mode,
                                    std::span<const local> src, const remote& dst, bool signal, std::uint8_t type,
                                    std::uint32_t immediate) {
    const std::uint32_t length = total_length(src);
    check_remote(dst);
    const std::size_t used = 2 + src.size();
    const std::size_t taken = check_place(ring, at, mode, used);
    put_entry(ring, at, taken, rdma_header(type, signal_flag(signal), used, length, dst, immediate), src, {});
    return taken;
}
}  // namespace detail

inline std::size_t write(std::span<std::byte> ring, std::size_t at, wqe_mode mode,
                         const send_op& o, bool signal) {
    return detail::write_send(ring, at, mode, o.src, signal, SQ_BASE_WQE_TYPE_SEND, 0);
}

inline std::size_t write(std::span<std::byte> ring, std::size_t at, wqe_mode mode,
                         const send_inline_op& o, bool signal) {
    detail::check_inline(o.data, mode);
    const std::size_t used = 2 + detail::inline_slots(o.data);
    const std::size_t taken = detail::check_place(ring, at, mode, used);
    const auto flags =
        static_cast<std::uint8_t>(detail::signal_flag(signal) | SQ_SEND_HDR_FLAGS_INLINE);
    detail::put_entry(ring, at, taken,
                      detail::send_header(flags, used, static_cast<std::uint32_t>(o.data.size())),
                      {}, o.data);
    return taken;
}

inline std::size_t write(std::span<std::byte> ring, std::size_t at, wqe_mode mode,
                         const write_op& o, bool signal) {
    return detail::write_rdma_write(ring, at, mode, o.src, o.dst, signal, SQ_BASE_WQE_TYPE_WRITE_WQE, 0);
}

inline std::size_t write(std::span<std::byte> ring, std::size_t at, wqe_mode mode,
                         const write_inline_op& o, bool signal) {
    detail::check_inline(o.data, mode);
    detail::check_remote(o.dst);
    const std::size_t used = 2 + detail::inline_slots(o.data);
    const std::size_t taken = detail::check_place(ring, at, mode, used);
    const auto flags =
        static_cast<std::uint8_t>(detail::signal_flag(signal) | SQ_SEND_HDR_FLAGS_INLINE);
    detail::put_entry(ring, at, taken,
                      detail::rdma_header(SQ_BASE_WQE_TYPE_WRITE_WQE, flags, used,
                                          static_cast<std::uint32_t>(o.data.size()), o.dst),
                      {}, o.data);
    return taken;
}

inline std::size_t write(std::span<std::byte> ring, std::size_t at, wqe_mode mode,
                         const send_imm_op& o, bool signal) {
    return detail::write_send(ring, at, mode, o.src, signal, SQ_BASE_WQE_TYPE_SEND_W_IMMEAD, o.immediate);
}

inline std::size_t write(std::span<std::byte> ring, std::size_t at, wqe_mode mode,
                         const write_imm_op& o, bool signal) {
    return detail::write_rdma_write(ring, at, mode, o.src, o.dst, signal, SQ_BASE_WQE_TYPE_WRITE_W_IMMEAD,
                                    o.immediate);
}

inline std::size_t write(std::span<std::byte> ring, std::size_t at, wqe_mode mode,
                         const read_op& o, bool signal) {
    detail::check_remote(o.src);
    const std::uint32_t length = detail::total_length(o.dst);
    const std::size_t used = 2 + o.dst.size();
    const std::size_t taken = detail::check_place(ring, at, mode, used);
    detail::put_entry(ring, at, taken,
                      detail::rdma_header(SQ_BASE_WQE_TYPE_READ_WQE, detail::signal_flag(signal),
                                          used, length, o.src),
                      o.dst, {});
    return taken;
}

// ---- the data path's writers -------------------------------------------------------------------
// The same bytes as write() (test/unit/bnxt/fast_path_test.cpp compares them, and write() is
// pinned to roce_hsi.h) for the entries a data path posts most, without write()'s checks: the
// caller gives values that fit (a checked length, key and address). Static mode only.
namespace fast {

// The entry composed in registers, word by word, then stored whole: each field's bits OR'd into
// its 64-bit word (every field here lies inside one aligned word: static_asserts), then every
// word stored once. A memset of the entry and a store per field over it cost two to four stores
// per word and a load for each sub-field (bench-post-bnxt).
// `Used`: the leading words that carry fields; store() writes them one 8-byte store each from a
// register, and the rest of the entry as zero. Left to itself, g++ (12, -O2) kept the whole
// entry's array on the stack and copied it out with 16-byte loads over pairs of 8-byte stores:
// a store-forwarding stall per pair: 32 entries per doorbell took 10.5 ns each, now 3.7 (bench-post-bnxt).
template <std::size_t Used>
struct words {
    std::array<std::uint64_t, Used> w{};

    template <const field_desc& D, std::size_t Base = 0>
    [[gnu::always_inline]] void put(std::uint64_t v) noexcept {
        static_assert(D.off % 8 + D.bytes <= 8, "a field that crosses a 64-bit word");
        static_assert((Base + D.off) / 8 < Used, "a field past the words the entry carries");
        w[(Base + D.off) / 8] |= ((v << D.shift) & D.bits()) << (8 * (D.off % 8));
    }
    // the entry's one scatter element (sq_sge: RQ entries use the same layout) at byte `At`
    template <std::size_t At, const field_desc& Va, const field_desc& Key, const field_desc& Size>
    [[gnu::always_inline]] void element(const local& l) noexcept {
        put<Va, At>(static_cast<std::uint64_t>(l.address));
        put<Key, At>(static_cast<std::uint64_t>(l.key));
        put<Size, At>(static_cast<std::uint64_t>(l.bytes));
    }
    template <std::size_t I>
    [[gnu::always_inline]] void store_word(std::byte* to) const noexcept {
        std::uint64_t v = w[I];
        asm("" : "+r"(v));   // one word in one register: no pairing through the stack (above)
        rig::abi::store_le<std::uint64_t>(to + 8 * I, v);
    }
    // The `Bytes` of the entry at `to`: the used words, then zeros.
    template <std::size_t Bytes>
    [[gnu::always_inline]] void store(std::byte* to) const noexcept {
        static_assert(Bytes % 8 == 0 && Bytes >= 8 * Used);
        // unrolled by the index sequence: a loop over the array kept it in memory when the
        // caller was not flattened (queue_pair::post_write)
        [&]<std::size_t... I>(std::index_sequence<I...>) { (store_word<I>(to), ...); }(std::make_index_sequence<Used>{});
        if constexpr (Bytes > 8 * Used) {
            std::memset(to + 8 * Used, 0, Bytes - 8 * Used);
        }
    }
};

inline constexpr field_desc wqe_type_f = field_of<sq_rdma_hdr>("wqe_type"), wqe_flags_f = field_of<sq_rdma_hdr>("flags"),
                            wqe_size_f = field_of<sq_rdma_hdr>("wqe_size"), wqe_length_f = field_of<sq_rdma_hdr>("length"),
                            wqe_va_f = field_of<sq_rdma_hdr>("remote_va"), wqe_key_f = field_of<sq_rdma_hdr>("remote_key"),
                            wqe_imm_f = field_of<sq_rdma_hdr>("imm_data"), sge_va_f = field_of<sq_sge>("va_or_pa"),
                            sge_key_f = field_of<sq_sge>("l_key"), sge_size_f = field_of<sq_sge>("size"),
                            rq_type_f = field_of<rq_wqe_hdr>("wqe_type"), rq_size_f = field_of<rq_wqe_hdr>("wqe_size"),
                            rq_id_f = field_of<rq_wqe_hdr>("wr_id"), psn_start_f = field_of<sq_psn_search_ext>("start_psn"),
                            psn_op_f = field_of<sq_psn_search_ext>("opcode"), psn_next_f = field_of<sq_psn_search_ext>("next_psn"),
                            psn_slot_f = field_of<sq_psn_search_ext>("start_slot_idx");
static_assert(wqe_type_f.off == field_of<sq_send_hdr>("wqe_type").off &&
              wqe_length_f.off == field_of<sq_send_hdr>("length").off);
static_assert(wqe_imm_f.off == field_of<sq_send_hdr>("inv_key_or_imm_data").off);

// A 128-byte static WQE with one element: SEND (remote ignored), WRITE or READ (wqe_type), or
// SEND or WRITE with `immediate`.
[[gnu::always_inline]] inline void write_one(std::byte* wqe, std::uint8_t wqe_type, std::uint8_t flags,
                                             const local& l, std::uint64_t remote_va, std::uint32_t remote_key,
                                             std::uint32_t immediate = 0) noexcept {
    constexpr std::size_t used = (sq_rdma_hdr::layout_size + sq_sge::layout_size) / 8;
    words<used> e;
    e.put<wqe_type_f>(wqe_type);
    e.put<wqe_flags_f>(flags);
    e.put<wqe_size_f>(3);   // header (2 slots) + one element
    e.put<wqe_length_f>(static_cast<std::uint64_t>(l.bytes));
    e.put<wqe_imm_f>(immediate);
    if (wqe_type != SQ_BASE_WQE_TYPE_SEND && wqe_type != SQ_BASE_WQE_TYPE_SEND_W_IMMEAD) {
        e.put<wqe_va_f>(remote_va);
        e.put<wqe_key_f>(remote_key);
    }
    e.element<sq_rdma_hdr::layout_size, sge_va_f, sge_key_f, sge_size_f>(l);
    e.store<static_wqe_slots * wqe_slot_size>(wqe);
}

// A 128-byte static RQ WQE with one element and `wr_id` (20 bits).
[[gnu::always_inline]] inline void write_receive(std::byte* wqe, std::uint32_t wr_id, const local& l) noexcept {
    constexpr std::size_t used = (rq_wqe_hdr::layout_size + sq_sge::layout_size) / 8;
    words<used> e;
    e.put<rq_type_f>(RQ_WQE_HDR_WQE_TYPE_RCV);
    e.put<rq_size_f>(3);
    e.put<rq_id_f>(wr_id);
    e.element<rq_wqe_hdr::layout_size, sge_va_f, sge_key_f, sge_size_f>(l);
    e.store<static_wqe_slots * wqe_slot_size>(wqe);
}

// An sq_psn_search_ext entry (P5, one per static WQE): the bytes encode() writes.
[[gnu::always_inline]] inline void write_psn_search(std::byte* entry, std::uint32_t start_psn, std::uint8_t opcode,
                                                    std::uint32_t next_psn, std::uint16_t start_slot_idx) noexcept {
    static_assert(sq_psn_search_ext::layout_size % 8 == 0);
    words<sq_psn_search_ext::layout_size / 8> e;
    e.put<psn_start_f>(start_psn);
    e.put<psn_op_f>(opcode);
    e.put<psn_next_f>(next_psn);
    e.put<psn_slot_f>(start_slot_idx);
    e.store<sq_psn_search_ext::layout_size>(entry);
}

}  // namespace fast

// One send-queue entry at slot `at`; returns the slots it took.
inline std::size_t write(std::span<std::byte> ring, std::size_t at, wqe_mode mode,
                         const entry& e) {
    return std::visit([&](const auto& o) { return write(ring, at, mode, o, e.signal); }, e.op);
}

// One receive-queue entry at slot `at`; returns the slots it took.
inline std::size_t write(std::span<std::byte> ring, std::size_t at, wqe_mode mode,
                         const receive& r) {
    if (r.dst.empty()) {
        throw std::invalid_argument("receive: no element (the RQ needs one; post one of 0 bytes)");
    }
    if (r.wr_id < 0 || r.wr_id > max_wr_id) {
        detail::refuse("receive.wr_id", r.wr_id);
    }
    detail::total_length(r.dst);
    const std::size_t used = 2 + r.dst.size();
    const std::size_t taken = detail::check_place(ring, at, mode, used);
    rq_wqe_hdr h{};
    h.wqe_size = static_cast<std::uint8_t>(used);
    h.wr_id = static_cast<std::uint32_t>(r.wr_id);
    detail::put_entry(ring, at, taken, to_bytes(h), r.dst, {});
    return taken;
}

}  // namespace rig::bnxt::abi
