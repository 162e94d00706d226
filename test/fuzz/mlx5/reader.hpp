#pragma once
// The fuzz bytes as a stream of small fields, for the mlx5 harnesses: an input is a sequence of
// (op selector, fields) records, so the fuzzer reaches deep states with a few bytes. Past the
// end every read gives 0 (an input is never refused for being short).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace rig::fuzz {

class reader {
public:
    reader(const std::uint8_t* data, std::size_t size) : _data(data), _size(size) {}

    bool empty() const noexcept { return _at >= _size; }
    std::size_t left() const noexcept { return empty() ? 0 : _size - _at; }

    std::uint8_t u8() noexcept { return empty() ? 0 : _data[_at++]; }
    std::uint16_t u16() noexcept { return static_cast<std::uint16_t>(u8() | u8() << 8); }
    std::uint32_t u32() noexcept { return static_cast<std::uint32_t>(u16()) | static_cast<std::uint32_t>(u16()) << 16; }
    std::uint64_t u64() noexcept { return std::uint64_t{u32()} | std::uint64_t{u32()} << 32; }
    // `out.size()` bytes, zero-filled past the end of the input.
    void bytes(std::span<std::byte> out) noexcept {
        const std::size_t n = out.size() < left() ? out.size() : left();
        if (n != 0) {
            std::memcpy(out.data(), _data + _at, n);
        }
        std::memset(out.data() + n, 0, out.size() - n);
        _at += n;
    }

private:
    const std::uint8_t* _data;
    std::size_t _size;
    std::size_t _at = 0;
};

}  // namespace rig::fuzz
