#pragma once
// Shared by the golden-byte generator and the tests: every field of a layout with its C member
// path and absolute bit offset, the shape set()/DEVX_SET use for it, and the distinctive value
// both sides write into it.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "abi/mlx5/ifc.hpp"

namespace rig::test::mlx5_ifc {

using rig::abi::field;
using rig::abi::hex;

// Messages without <format> (g++ 12 has none): cat("a", std::string, 42) -> "a...42".
inline void cat_one(std::string& out, std::string_view s) { out += s; }
inline void cat_one(std::string& out, const char* s) { out += s; }
inline void cat_one(std::string& out, const std::string& s) { out += s; }
template <class T>
    requires std::is_integral_v<T>
inline void cat_one(std::string& out, T v) {
    out += std::to_string(v);
}
template <class... A>
std::string cat(const A&... a) {
    std::string out;
    (cat_one(out, a), ...);
    return out;
}
using rig::mlx5::ifc::layout_info;

struct entry {
    std::string path;  // C member path: "qpc.primary_address_path.vhca_port_num"
    field f;           // absolute: from the start of the layout
    bool nested;       // a nested structure (its whole extent), not a leaf
};

inline void walk(std::span<const rig::abi::named_field> fields, std::uint32_t base,
                 const std::string& prefix, std::vector<entry>& out) {
    for (const auto& nf : fields) {
        std::string path = prefix.empty() ? std::string(nf.name) : prefix + "." + std::string(nf.name);
        out.push_back({path, nf.f.at(base), !nf.sub.empty()});
        if (!nf.sub.empty()) {
            walk(nf.sub, base + nf.f.off, path, out);
        }
    }
}

// Nested structures first, then their leaves, depth first, in declaration order: the order in
// which both sides write the pattern (it matters where C union members overlap).
inline std::vector<entry> entries(const layout_info& l) {
    std::vector<entry> out;
    walk(l.fields, 0, "", out);
    return out;
}

enum class shape { word, qword, bytes };

// Decided on the absolute position, as DEVX_SET64 needs 64-bit alignment in the whole buffer.
inline shape shape_of(field f) {
    if (rig::abi::is_word_field(f)) {
        return shape::word;
    }
    if (rig::abi::is_qword_field(f)) {
        return shape::qword;
    }
    return shape::bytes;
}

inline std::uint64_t fnv1a(std::string_view s) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (char c : s) {
        h ^= static_cast<unsigned char>(c);
        h *= 0x100000001b3ull;
    }
    return h;
}

// A distinctive nonzero value for a word or 64-bit field, a function of layout and path only.
inline std::uint64_t pattern_value(std::string_view layout, std::string_view path, std::uint32_t bits) {
    std::uint64_t v = fnv1a(std::string(layout) + "/" + std::string(path));
    if (bits < 64) {
        v &= (1ull << bits) - 1;
    }
    return v != 0 ? v : 1;
}

// Distinctive nonzero bytes for a byte-string field.
inline std::vector<std::byte> pattern_bytes(std::string_view layout, std::string_view path, std::size_t n) {
    std::vector<std::byte> out(n);
    std::uint64_t x = fnv1a(std::string(layout) + "/" + std::string(path));
    for (std::size_t i = 0; i < n; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        const auto b = static_cast<std::uint8_t>(x >> 24);
        out[i] = std::byte{b != 0 ? b : std::uint8_t{0x5a}};
    }
    return out;
}

// The whole layout with every leaf set to its pattern through our set()/set_bytes().
inline std::vector<std::byte> build_image(const layout_info& l) {
    std::vector<std::byte> img(l.size_bits / 8);
    for (const entry& e : entries(l)) {
        if (e.nested) {
            continue;
        }
        switch (shape_of(e.f)) {
        case shape::word:
        case shape::qword:
            rig::abi::set(img, e.f, pattern_value(l.name, e.path, e.f.bits));
            break;
        case shape::bytes:
            rig::abi::set_bytes(img, e.f, pattern_bytes(l.name, e.path, e.f.bits / 8));
            break;
        }
    }
    return img;
}

}  // namespace rig::test::mlx5_ifc
