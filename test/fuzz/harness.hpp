#pragma once
// What every harness in test/fuzz shares: the libFuzzer entry point's signature and the one way
// a harness says an invariant broke (libFuzzer catches the abort, saves the input as a crash).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace rig::fuzz {

// An oracle's verdict: not an assert (gone under NDEBUG), always checked.
inline void require(bool holds, std::string_view what) {
    if (!holds) {
        std::fprintf(stderr, "fuzz invariant broken: %.*s\n", static_cast<int>(what.size()), what.data());
        std::abort();
    }
}

inline std::span<const std::byte> bytes_of(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const std::byte*>(data), size};
}

inline std::string_view text_of(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

}  // namespace rig::fuzz
