#pragma once
// The fuzz bytes as a stream of fields, for every harness that turns its input into a script of
// choices and values. Past the end of the input every read gives zeros (an input is never refused
// for being short: every input is a complete script), except copy_some, which leaves what it
// cannot fill as it was. The committed corpora were written for exactly these layouts: integers
// little-endian unless the name says network order, one byte for a choice or a length prefix.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace rig::fuzz {

class reader {
public:
    reader(const std::uint8_t* data, std::size_t size) : _data(data), _size(size) {}

    bool empty() const noexcept { return _at == _size; }
    std::size_t left() const noexcept { return _size - _at; }

    // Integers, little-endian (the first byte the lowest); missing bytes read as zero.
    std::uint8_t u8() noexcept { return empty() ? 0 : _data[_at++]; }
    std::uint16_t u16() noexcept { return static_cast<std::uint16_t>(little_endian(2)); }
    std::uint32_t u32() noexcept { return static_cast<std::uint32_t>(little_endian(4)); }
    std::uint64_t u64() noexcept { return little_endian(8); }

    // Integers in network order (the first byte the highest), as a wire header holds them.
    std::uint16_t u16_be() noexcept { return static_cast<std::uint16_t>(big_endian(2)); }
    std::uint32_t u32_be() noexcept { return static_cast<std::uint32_t>(big_endian(4)); }

    // One of `n` choices (one byte).
    unsigned pick(unsigned n) noexcept { return u8() % n; }

    // Exactly `out.size()` bytes, zero-filled past the end of the input.
    void fill(std::span<std::byte> out) noexcept {
        const std::size_t n = copy_some(out);
        if (n < out.size()) {   // memset of an empty span's null data is undefined
            std::memset(out.data() + n, 0, out.size() - n);
        }
    }
    // Up to `out.size()` bytes, as many as the input has left; the rest of `out` stays as it was
    // (a harness that mutates a valid template keeps the template's tail). Returns how many.
    std::size_t copy_some(std::span<std::byte> out) noexcept {
        const std::size_t n = std::min(out.size(), left());
        if (n != 0) {
            std::memcpy(out.data(), _data + _at, n);
        }
        _at += n;
        return n;
    }
    // The next `k` bytes of the input in place (fewer at its end): no copy.
    std::span<const std::byte> take(std::size_t k) noexcept {
        k = std::min(k, left());
        const auto* at = reinterpret_cast<const std::byte*>(_data + _at);
        _at += k;
        return {at, k};
    }

    // A length byte, then that many bytes (at most `max`, at most what is left).
    std::vector<std::byte> sized_bytes(std::size_t max) {
        const std::size_t length = std::min<std::size_t>(u8(), max);
        const auto b = take(length);
        return {b.begin(), b.end()};
    }
    std::string sized_text(std::size_t max) {
        const auto b = sized_bytes(max);
        return {reinterpret_cast<const char*>(b.data()), b.size()};
    }

    // A count byte (at most `most`), then that many single-byte overwrites of `target`, each a
    // u16 offset (modulo the size) and the new byte: small mutations of a valid template.
    void overwrite(std::span<std::byte> target, unsigned most) noexcept {
        const unsigned count = u8() % (most + 1);
        for (unsigned i = 0; i < count && !target.empty(); ++i) {
            const std::size_t at = u16() % target.size();
            target[at] = std::byte{u8()};
        }
    }

private:
    // Each byte is read in its own statement: the order the input is consumed in is the layout.
    std::uint64_t little_endian(unsigned bytes) noexcept {
        std::uint64_t v = 0;
        for (unsigned i = 0; i < bytes; ++i) {
            v |= std::uint64_t{u8()} << (8 * i);
        }
        return v;
    }
    std::uint64_t big_endian(unsigned bytes) noexcept {
        std::uint64_t v = 0;
        for (unsigned i = 0; i < bytes; ++i) {
            v = v << 8 | u8();
        }
        return v;
    }

    const std::uint8_t* _data;
    std::size_t _size;
    std::size_t _at = 0;
};

}  // namespace rig::fuzz
