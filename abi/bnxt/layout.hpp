#pragma once
// The layout language of Broadcom bnxt hardware formats (bnxt_hsi.h, roce_hsi.h).
//
// Every bnxt structure the firmware or the chip reads is a packed little-endian C struct: fields
// sit at byte offsets, and sub-fields are named by a MASK/SFT pair inside one little-endian word
// (e.g. roce_hsi.h `cmdq_init.cmdq_size_cmdq_lvl` holds CMDQ_INIT_CMDQ_LVL_MASK 0x3 and
// CMDQ_INIT_CMDQ_SIZE_MASK 0xfffc). A layout here is declared once as the list of those fields,
// in the kernel's own names, and becomes a plain struct of host-order values plus a table of
// field descriptors:
//
//   #define RIG_BNXT_CMDQ_INIT(W, D, F, A)
//       W(cmdq_pbl,     std::uint64_t, 0)
//       F(cmdq_lvl,     std::uint16_t, 8, 0x0003, 0)
//       F(cmdq_size,    std::uint16_t, 8, 0xfffc, 2)       (one line per field, joined by \)
//   RIG_BNXT_LAYOUT(cmdq_init, 16, RIG_BNXT_CMDQ_INIT)
//
//   W(name, T, off)                 the whole little-endian word T at byte off
//   D(name, T, off, default)        the same, with a default value (opcodes, sizes, "no ring")
//   F(name, T, off, mask, shift)    the bits `mask` (already shifted, as the kernel's *_MASK) of
//                                   the word T at byte off; the value is stored at `shift`
//   A(name, off, len)               len bytes copied as they are (GIDs, MACs, names)
//
// A sub-field is named after its MASK define without the struct prefix (CMDQ_INIT_CMDQ_LVL_MASK
// → cmdq_lvl); a whole word keeps the member name. Bytes no field names are written as zero.
// encode() refuses (std::invalid_argument, naming struct, field and value) before it writes any
// byte; decode() is for device-written memory and reports a short buffer as a value.
// No C/C++ bitfields and no host-order struct touches device memory.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <expected>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "abi/bits.hpp"

namespace rig::bnxt::abi {

// One field of a layout: `bytes` is the width of the little-endian word (1, 2, 4, 8) or, for a
// byte string, its length; `mask` is 0 for a whole word or a byte string.
struct field_desc {
    std::string_view name;
    std::uint16_t off;
    std::uint16_t bytes;
    std::uint64_t mask;
    std::uint8_t shift;
    bool is_bytes;

    constexpr std::uint64_t word_mask() const noexcept {
        return bytes >= 8 ? ~0ull : (1ull << (8 * bytes)) - 1;
    }
    // the bits of the word this field occupies
    constexpr std::uint64_t bits() const noexcept { return mask != 0 ? mask : word_mask(); }
    // the largest value the field takes
    constexpr std::uint64_t max_value() const noexcept { return bits() >> shift; }
};

// Every word field 1/2/4/8 bytes wide and inside the layout, every mask inside its word and
// contiguous, no two fields sharing a bit.
constexpr bool well_formed(std::span<const field_desc> fields, std::size_t size) {
    for (std::size_t i = 0; i < fields.size(); ++i) {
        const field_desc& a = fields[i];
        if (a.off + a.bytes > size) {
            return false;
        }
        if (!a.is_bytes) {
            if (a.bytes != 1 && a.bytes != 2 && a.bytes != 4 && a.bytes != 8) {
                return false;
            }
            if ((a.bits() & ~a.word_mask()) != 0 || a.bits() == 0) {
                return false;
            }
            const std::uint64_t low = a.bits() >> a.shift;
            if ((low << a.shift) != a.bits() || (low & 1) == 0 || (low & (low + 1)) != 0) {
                return false;   // shift does not match the mask, or the mask has holes
            }
        }
        for (std::size_t j = i + 1; j < fields.size(); ++j) {
            const field_desc& b = fields[j];
            if (a.off + a.bytes <= b.off || b.off + b.bytes <= a.off) {
                continue;
            }
            // overlapping bytes are allowed only for sub-fields of the same word
            if (a.is_bytes || b.is_bytes || a.off != b.off || a.bytes != b.bytes ||
                (a.bits() & b.bits()) != 0) {
                return false;
            }
        }
    }
    return true;
}

// Why a decoder refused device-written memory. Not an exception: bad device output is not the
// caller's misuse. `what` names the structure; `value` the offending value where there is one.
struct decode_error {
    enum class kind : std::uint8_t {
        short_buffer,    // fewer bytes than the structure has (need/have)
        unknown_type,    // a type code (CQE type, CREQ type) the decoder does not know
        unknown_event,   // a CREQ event / command opcode the decoder does not know
        bad_length,      // a length field that points outside the buffer (HWRM resp_len)
    };
    kind k;
    std::string_view what;
    std::uint64_t value = 0;
    std::size_t need = 0;
    std::size_t have = 0;

    std::string message() const {
        using rig::abi::hex;
        const std::string w(what);
        switch (k) {
        case kind::short_buffer:
            return w + ": " + std::to_string(have) + " bytes given, " + std::to_string(need) +
                   " needed";
        case kind::unknown_type: return w + ": unknown type " + hex(value);
        case kind::unknown_event: return w + ": unknown event/opcode " + hex(value);
        case kind::bad_length:
            return w + ": length " + std::to_string(value) + " outside the " +
                   std::to_string(have) + "-byte buffer";
        }
        return w;
    }
};

namespace detail {

inline std::uint64_t load_word(const std::byte* p, std::uint16_t bytes) noexcept {
    using rig::abi::load_le;
    switch (bytes) {
    case 1: return load_le<std::uint8_t>(p);
    case 2: return load_le<std::uint16_t>(p);
    case 4: return load_le<std::uint32_t>(p);
    default: return load_le<std::uint64_t>(p);
    }
}

inline void store_word(std::byte* p, std::uint16_t bytes, std::uint64_t v) noexcept {
    using rig::abi::store_le;
    switch (bytes) {
    case 1: store_le<std::uint8_t>(p, static_cast<std::uint8_t>(v)); break;
    case 2: store_le<std::uint16_t>(p, static_cast<std::uint16_t>(v)); break;
    case 4: store_le<std::uint32_t>(p, static_cast<std::uint32_t>(v)); break;
    default: store_le<std::uint64_t>(p, v); break;
    }
}

template <class T>
inline constexpr bool is_byte_array = false;
template <std::size_t N>
inline constexpr bool is_byte_array<std::array<std::uint8_t, N>> = true;

}  // namespace detail

// The descriptor of layout L's field `name`, at compile time (a name L lacks does not compile
// where a constant is needed): for a data path that touches one field of an entry in place.
template <class L>
consteval field_desc field_of(std::string_view name) {
    for (const field_desc& d : L::fields) {
        if (d.name == name) {
            return d;
        }
    }
    throw std::invalid_argument("no such field");
}

// The data path's field access: one field of a structure in place, by its descriptor (a
// constant: field_of), without the checks of encode/decode. `store` keeps the word's other bits
// (sub-fields of one word) and takes the value's low bits; the caller gives values that fit.
// Pinned by the same oracle as encode (test/unit/bnxt/fast_path_test.cpp compares them).
[[gnu::always_inline]] inline void store(std::byte* base, const field_desc& d, std::uint64_t v) noexcept {
    std::byte* p = base + d.off;
    if (d.mask == 0) {
        detail::store_word(p, d.bytes, v);
    } else {
        const std::uint64_t word = detail::load_word(p, d.bytes);
        detail::store_word(p, d.bytes, (word & ~d.bits()) | ((v << d.shift) & d.bits()));
    }
}
[[gnu::always_inline]] inline std::uint64_t load(const std::byte* base, const field_desc& d) noexcept {
    return (detail::load_word(base + d.off, d.bytes) & d.bits()) >> d.shift;
}
// A field's bits at its place in a word of up to 64 bits that holds the whole structure
// (dbc_dbc: one 64-bit doorbell), little-endian: the value shifted to the field's bit position.
constexpr std::uint64_t place(const field_desc& d, std::uint64_t v) noexcept {
    return ((v << d.shift) & d.bits()) << (8 * d.off);
}

// Throws std::invalid_argument if a value of `v` does not fit its field.
template <class L>
void validate(const L& v) {
    L::for_each_field(v, [](const field_desc& d, const auto& m) {
        if constexpr (!detail::is_byte_array<std::remove_cvref_t<decltype(m)>>) {
            const auto x = static_cast<std::uint64_t>(m);
            if (x > d.max_value()) {
                throw std::invalid_argument(std::string(L::layout_name) + "." +
                                            std::string(d.name) + ": value " + rig::abi::hex(x) +
                                            " does not fit the field (largest " +
                                            rig::abi::hex(d.max_value()) + ")");
            }
        }
    });
}

// Writes the L::layout_size bytes of `v` at the start of `out`: fields in place, every other
// byte of the structure zero, nothing after it. Refuses a short buffer or a value wider than its
// field before writing anything.
template <class L>
void encode(std::span<std::byte> out, const L& v) {
    if (out.size() < L::layout_size) {
        throw std::invalid_argument(std::string(L::layout_name) + ": buffer of " +
                                    std::to_string(out.size()) + " bytes, the structure has " +
                                    std::to_string(L::layout_size));
    }
    validate(v);
    std::memset(out.data(), 0, L::layout_size);
    L::for_each_field(v, [&](const field_desc& d, const auto& m) {
        std::byte* p = out.data() + d.off;
        if constexpr (detail::is_byte_array<std::remove_cvref_t<decltype(m)>>) {
            std::memcpy(p, m.data(), m.size());
        } else {
            const std::uint64_t x = static_cast<std::uint64_t>(m);
            const std::uint64_t word = detail::load_word(p, d.bytes);
            detail::store_word(p, d.bytes, (word & ~d.bits()) | ((x << d.shift) & d.bits()));
        }
    });
}

// The structure of type L at the start of `in`, every field read; a buffer shorter than the
// structure is an error value.
template <class L>
std::expected<L, decode_error> decode(std::span<const std::byte> in) {
    if (in.size() < L::layout_size) {
        return std::unexpected(decode_error{decode_error::kind::short_buffer, L::layout_name, 0,
                                            L::layout_size, in.size()});
    }
    L v{};
    L::for_each_field(v, [&](const field_desc& d, auto& m) {
        const std::byte* p = in.data() + d.off;
        if constexpr (detail::is_byte_array<std::remove_cvref_t<decltype(m)>>) {
            std::memcpy(m.data(), p, m.size());
        } else {
            const std::uint64_t word = detail::load_word(p, d.bytes);
            m = static_cast<std::remove_cvref_t<decltype(m)>>((word & d.bits()) >> d.shift);
        }
    });
    return v;
}

// Encodes into a fresh array of exactly L::layout_size bytes.
template <class L>
std::array<std::byte, L::layout_size> to_bytes(const L& v) {
    std::array<std::byte, L::layout_size> b{};
    encode(std::span<std::byte>(b), v);
    return b;
}

}  // namespace rig::bnxt::abi

// ---- the declaration macros ---------------------------------------------------------------------

#define RIG_BNXT_MEMBER_W(name, T, off) T name{};
#define RIG_BNXT_MEMBER_D(name, T, off, dflt) T name{dflt};
#define RIG_BNXT_MEMBER_F(name, T, off, mask, shift) T name{};
#define RIG_BNXT_MEMBER_A(name, off, len) std::array<std::uint8_t, len> name{};

#define RIG_BNXT_ROW_W(name, T, off) \
    ::rig::bnxt::abi::field_desc{#name, off, sizeof(T), 0, 0, false},
#define RIG_BNXT_ROW_D(name, T, off, dflt) \
    ::rig::bnxt::abi::field_desc{#name, off, sizeof(T), 0, 0, false},
#define RIG_BNXT_ROW_F(name, T, off, mask, shift) \
    ::rig::bnxt::abi::field_desc{#name, off, sizeof(T), mask, shift, false},
#define RIG_BNXT_ROW_A(name, off, len) ::rig::bnxt::abi::field_desc{#name, off, len, 0, 0, true},

#define RIG_BNXT_VISIT_W(name, T, off) fn(fields[i_++], s.name);
#define RIG_BNXT_VISIT_D(name, T, off, dflt) fn(fields[i_++], s.name);
#define RIG_BNXT_VISIT_F(name, T, off, mask, shift) fn(fields[i_++], s.name);
#define RIG_BNXT_VISIT_A(name, off, len) fn(fields[i_++], s.name);

// Declares struct `type` (use it inside namespace rig::bnxt::abi): its members in list order,
// `layout_name`, `layout_size` (bytes), `fields` (the descriptor table) and
// `for_each_field(s, fn)`, which calls fn(descriptor, member) for every field.
#define RIG_BNXT_LAYOUT(type, size_bytes, LIST)                                                    \
    struct type {                                                                                  \
        LIST(RIG_BNXT_MEMBER_W, RIG_BNXT_MEMBER_D, RIG_BNXT_MEMBER_F, RIG_BNXT_MEMBER_A)           \
        static constexpr std::string_view layout_name = #type;                                     \
        static constexpr std::size_t layout_size = size_bytes;                                     \
        static constexpr ::rig::bnxt::abi::field_desc fields[] = {                                 \
            LIST(RIG_BNXT_ROW_W, RIG_BNXT_ROW_D, RIG_BNXT_ROW_F, RIG_BNXT_ROW_A)};                 \
        template <class Self, class Fn>                                                            \
        static constexpr void for_each_field(Self& s, Fn&& fn) {                                   \
            std::size_t i_ = 0;                                                                    \
            LIST(RIG_BNXT_VISIT_W, RIG_BNXT_VISIT_D, RIG_BNXT_VISIT_F, RIG_BNXT_VISIT_A)           \
        }                                                                                          \
        bool operator==(const type&) const = default;                                              \
    };                                                                                             \
    static_assert(::rig::bnxt::abi::well_formed(type::fields, type::layout_size),                  \
                  #type ": a field is misshapen, outside the structure, or overlaps another")
