#pragma once
// Byte order and bit fields of device-visible memory, defined once for every layout in abi/.
//
// Two conventions exist in the hardware we drive:
//  - mlx5 (PRM, include/linux/mlx5/mlx5_ifc.h): structures are sequences of big-endian 32-bit
//    dwords; a field is named by its bit offset from the start of the structure, counting from
//    the most significant bit of byte 0, and its width. That is exactly what MLX5_SET/DEVX_SET
//    compute: `dword = off / 32`, `shift = 32 - width - (off % 32)`.
//  - bnxt (bnxt_hsi.h, roce_hsi.h): little-endian C structs, fields at byte offsets, sub-fields
//    by mask and shift inside a little-endian word.
// No C/C++ bitfields and no host-order structs touch device memory: both hide byte order.
#include <bit>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace rig::abi {

// ---- plain loads and stores of a given byte order at any alignment ----------------------------

// An array of octets (a MAC, a GID as firmware structs hold them) as std::byte.
template <std::size_t N>
constexpr std::array<std::byte, N> byte_array(const std::array<std::uint8_t, N>& a) noexcept {
    std::array<std::byte, N> out{};
    for (std::size_t i = 0; i < N; ++i) {
        out[i] = std::byte{a[i]};
    }
    return out;
}

template <class T>
inline T load_be(const std::byte* p) noexcept {
    T v;
    std::memcpy(&v, p, sizeof v);
    if constexpr (std::endian::native == std::endian::little && sizeof(T) > 1) {
        v = std::byteswap(v);
    }
    return v;
}

template <class T>
inline void store_be(std::byte* p, T v) noexcept {
    if constexpr (std::endian::native == std::endian::little && sizeof(T) > 1) {
        v = std::byteswap(v);
    }
    std::memcpy(p, &v, sizeof v);
}

template <class T>
inline T load_le(const std::byte* p) noexcept {
    T v;
    std::memcpy(&v, p, sizeof v);
    if constexpr (std::endian::native == std::endian::big && sizeof(T) > 1) {
        v = std::byteswap(v);
    }
    return v;
}

template <class T>
inline void store_le(std::byte* p, T v) noexcept {
    if constexpr (std::endian::native == std::endian::big && sizeof(T) > 1) {
        v = std::byteswap(v);
    }
    std::memcpy(p, &v, sizeof v);
}

// Host-order value <-> big-endian representation, for words built in registers.
constexpr std::uint32_t to_be32(std::uint32_t v) noexcept {
    return std::endian::native == std::endian::little ? std::byteswap(v) : v;
}
constexpr std::uint64_t to_be64(std::uint64_t v) noexcept {
    return std::endian::native == std::endian::little ? std::byteswap(v) : v;
}
constexpr std::uint16_t to_be16(std::uint16_t v) noexcept {
    return std::endian::native == std::endian::little ? std::byteswap(v) : v;
}

// ---- mlx5_ifc-style fields ---------------------------------------------------------------------

// A field of a big-endian PRM layout: bit offset (bit 0 = MSB of byte 0) and width in bits.
struct field {
    std::uint32_t off;
    std::uint32_t bits;

    constexpr std::uint32_t end() const noexcept { return off + bits; }
    constexpr std::size_t byte_offset() const noexcept { return off / 8; }
    constexpr std::size_t byte_size() const noexcept { return bits / 8; }
    // the field's place inside a structure that starts `base` bits into another one
    constexpr field at(std::uint32_t base) const noexcept { return {base + off, bits}; }
};

// The three shapes mlx5_ifc.h uses, and the only ones set()/get() accept:
//  - up to 32 bits inside one dword (MLX5_SET),
//  - 64 bits on a 64-bit boundary (MLX5_SET64),
//  - a byte string: whole bytes on a byte boundary, wider than 32 bits (GIDs, MACs, inline data).
constexpr bool is_word_field(field f) noexcept {
    return f.bits >= 1 && f.bits <= 32 && f.off / 32 == (f.end() - 1) / 32;
}
constexpr bool is_qword_field(field f) noexcept { return f.bits == 64 && f.off % 64 == 0; }
constexpr bool is_bytes_field(field f) noexcept {
    return f.bits > 32 && f.bits % 8 == 0 && f.off % 8 == 0;
}
constexpr bool well_formed(field f) noexcept {
    return is_word_field(f) || is_qword_field(f) || is_bytes_field(f);
}

// "0x1f": hexadecimal for messages (g++ 12 has no <format>; abi/ needs nothing outside std).
inline std::string hex(std::uint64_t v) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s;
    do {
        s.insert(s.begin(), digits[v & 15]);
        v >>= 4;
    } while (v != 0);
    return "0x" + s;
}

// "00ff1a...": lowercase hex of every byte, no separators (command traces, rig-info --commands).
inline std::string hex_bytes(std::span<const std::byte> bytes) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s;
    s.reserve(bytes.size() * 2);
    for (const std::byte b : bytes) {
        const auto v = std::to_integer<unsigned>(b);
        s += digits[v >> 4];
        s += digits[v & 0xf];
    }
    return s;
}

namespace detail {
[[noreturn]] inline void field_outside(field f, std::size_t size) {
    throw std::invalid_argument("field at bit " + hex(f.off) + " (" + std::to_string(f.bits) +
                                " bits) lies outside a " + std::to_string(size) + "-byte buffer");
}
[[noreturn]] inline void value_too_wide(field f, std::uint64_t v) {
    throw std::invalid_argument("value " + hex(v) + " does not fit the " + std::to_string(f.bits) +
                                "-bit field at bit " + hex(f.off));
}
[[noreturn]] inline void wrong_shape(field f, std::string_view what) {
    throw std::invalid_argument("the " + std::to_string(f.bits) + "-bit field at bit " + hex(f.off) +
                                " is not " + std::string(what));
}
}  // namespace detail

// The accessors are always inlined: with a constant field, the checks and shifts fold away on
// the model's and the driver's data paths (decode, WQE parsing); the bytes are the same.
// Writes v into field f of b. Misuse (f outside b, v wider than f, f a byte string) throws
// std::invalid_argument and leaves b untouched.
[[gnu::always_inline]] inline void set(std::span<std::byte> b, field f, std::uint64_t v) {
    if (f.end() > b.size() * 8) {
        detail::field_outside(f, b.size());
    }
    if (is_qword_field(f)) {
        store_be<std::uint64_t>(b.data() + f.off / 8, v);
        return;
    }
    if (!is_word_field(f)) {
        detail::wrong_shape(f, "a word or a 64-bit field");
    }
    if (f.bits < 64 && (v >> f.bits) != 0) {
        detail::value_too_wide(f, v);
    }
    std::byte* dw = b.data() + (f.off / 32) * 4;
    const std::uint32_t shift = 32 - f.bits - (f.off % 32);
    const std::uint32_t mask = static_cast<std::uint32_t>(((1ull << f.bits) - 1) << shift);
    const std::uint32_t old = load_be<std::uint32_t>(dw);
    store_be<std::uint32_t>(dw, (old & ~mask) | (static_cast<std::uint32_t>(v) << shift));
}

[[gnu::always_inline]] inline std::uint64_t get(std::span<const std::byte> b, field f) {
    if (f.end() > b.size() * 8) {
        detail::field_outside(f, b.size());
    }
    if (is_qword_field(f)) {
        return load_be<std::uint64_t>(b.data() + f.off / 8);
    }
    if (!is_word_field(f)) {
        detail::wrong_shape(f, "a word or a 64-bit field");
    }
    const std::uint32_t shift = 32 - f.bits - (f.off % 32);
    const std::uint64_t mask = (1ull << f.bits) - 1;
    return (load_be<std::uint32_t>(b.data() + (f.off / 32) * 4) >> shift) & mask;
}

// The bytes of a byte-string field (also accepts a whole nested structure).
[[gnu::always_inline]] inline std::span<std::byte> bytes_of(std::span<std::byte> b, field f) {
    if (f.off % 8 != 0 || f.bits % 8 != 0) {
        detail::wrong_shape(f, "whole bytes");
    }
    if (f.end() > b.size() * 8) {
        detail::field_outside(f, b.size());
    }
    return b.subspan(f.off / 8, f.bits / 8);
}
[[gnu::always_inline]] inline std::span<const std::byte> bytes_of(std::span<const std::byte> b, field f) {
    if (f.off % 8 != 0 || f.bits % 8 != 0) {
        detail::wrong_shape(f, "whole bytes");
    }
    if (f.end() > b.size() * 8) {
        detail::field_outside(f, b.size());
    }
    return b.subspan(f.off / 8, f.bits / 8);
}

// Copies src into byte-string field f of b; src must be exactly the field's size.
inline void set_bytes(std::span<std::byte> b, field f, std::span<const std::byte> src) {
    std::span<std::byte> dst = bytes_of(b, f);
    if (src.size() != dst.size()) {
        throw std::invalid_argument(std::to_string(src.size()) + " bytes given for the " +
                                    std::to_string(dst.size()) + "-byte field at bit " + hex(f.off));
    }
    std::memcpy(dst.data(), src.data(), dst.size());
}

// Compile-time checked forms: the field is a template argument, so its shape is checked once.
template <field F>
[[gnu::always_inline]] inline void set(std::span<std::byte> b, std::uint64_t v) {
    static_assert(is_word_field(F) || is_qword_field(F), "set<F>: F must be a word or 64-bit field");
    set(b, F, v);
}
template <field F>
[[gnu::always_inline]] inline std::uint64_t get(std::span<const std::byte> b) {
    static_assert(is_word_field(F) || is_qword_field(F), "get<F>: F must be a word or 64-bit field");
    return get(b, F);
}

// ---- layouts: a named list of fields, walkable by tests and by the golden-byte generator -------

struct named_field {
    std::string_view name;
    field f;                            // for a nested structure: its offset and whole size
    std::span<const named_field> sub;   // the nested structure's fields, empty for a leaf
};

// A nested structure of layout L at bit `off` of its parent: `parent::member(L::field)`.
template <class L>
struct nested {
    std::uint32_t off;
    constexpr field operator()(field f) const noexcept { return f.at(off); }
    constexpr field whole() const noexcept { return {off, L::size_bits}; }
};

// Every field well-formed, inside the layout, and no two leaves overlapping.
constexpr bool well_formed(std::span<const named_field> fields, std::uint32_t size_bits) {
    for (std::size_t i = 0; i < fields.size(); ++i) {
        const named_field& a = fields[i];
        if (a.f.end() > size_bits) {
            return false;
        }
        if (a.sub.empty() && !well_formed(a.f)) {
            return false;
        }
        if (!a.sub.empty() && !well_formed(a.sub, a.f.bits)) {
            return false;
        }
        for (std::size_t j = i + 1; j < fields.size(); ++j) {
            const named_field& b = fields[j];
            // nested structures may overlap each other (C unions) but never a leaf
            const bool both_nested = !a.sub.empty() && !b.sub.empty();
            if (!both_nested && a.f.off < b.f.end() && b.f.off < a.f.end()) {
                return false;
            }
        }
    }
    return true;
}

}  // namespace rig::abi
