#pragma once
// What the two vfio-user harnesses' scripts share (client.cpp plays the server, server.cpp the
// client): appending a wire struct to a message, and choosing a field among its usual values.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "test/fuzz/reader.hpp"

namespace rig::fuzz {

// `v`'s bytes as they lie in memory (the vfio-user structs are little-endian, packed) after `out`'s.
template <class T>
void put(std::vector<std::byte>& out, const T& v) {
    const std::size_t at = out.size();
    out.resize(at + sizeof(T));
    std::memcpy(out.data() + at, &v, sizeof(T));
}

// The first of `usual` when the bytes have run out (they read as zeros), another, or any.
inline std::uint32_t one_of(reader& r, std::initializer_list<std::uint32_t> usual) {
    const unsigned i = r.pick(static_cast<unsigned>(usual.size() + 1));
    return i < usual.size() ? usual.begin()[i] : r.u32();
}

}  // namespace rig::fuzz
