#pragma once
// rig-info's output: one "key  value" line per fact, MACs and GIDs as text, one line on
// stderr for a failure. Shared by every family's report (mlx5.cpp, bnxt.cpp).
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace rig::info {

inline std::string hex_bytes(const std::uint8_t* b, std::size_t n, char separator, std::size_t group) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s;
    for (std::size_t i = 0; i < n; ++i) {
        if (i != 0 && i % group == 0) {
            s += separator;
        }
        s += digits[b[i] >> 4];
        s += digits[b[i] & 0xf];
    }
    return s;
}

// 02:00:00:00:00:01
inline std::string mac_text(const std::array<std::uint8_t, 6>& m) { return hex_bytes(m.data(), m.size(), ':', 1); }

// An IPv6-style GID: eight groups of four hex digits.
inline std::string gid_text(const std::array<std::uint8_t, 16>& g) { return hex_bytes(g.data(), g.size(), ':', 2); }

inline std::string pow2(unsigned log) {
    return std::to_string(1ull << log) + " (2^" + std::to_string(log) + ")";
}

inline void line(const std::string& key, const std::string& value) {
    std::printf("%-26s %s\n", key.c_str(), value.c_str());
}

inline int fail(const std::string& why) {
    std::fprintf(stderr, "rig-info: %s\n", why.c_str());
    return 1;
}

}  // namespace rig::info
