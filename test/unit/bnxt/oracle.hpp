#pragma once
// Runs test/unit/bnxt/bnxt_oracle.c (built against the kernel's bnxt_hsi.h and roce_hsi.h) and
// returns its output lines: with no requests, the layout dump; with requests, the bytes of one
// entry per request line. The oracle's path comes from RIG_BNXT_ORACLE, set by meson.
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include "test/unit/oracle.hpp"

namespace rig::test::bnxt {

inline std::vector<std::string> run_oracle(const std::string& args, const std::string& input) {
    return rig::test::run_oracle("RIG_BNXT_ORACLE", args, input);
}

// The layout dump, read once.
inline const std::vector<std::string>& oracle_dump() {
    static const std::vector<std::string> lines = run_oracle("", "");
    return lines;
}

inline std::vector<std::string> words(const std::string& line) {
    std::istringstream in(line);
    std::vector<std::string> w;
    for (std::string s; in >> s;) {
        w.push_back(s);
    }
    return w;
}

using rig::test::to_hex;

inline std::vector<std::byte> from_hex(const std::string& h) {
    std::vector<std::byte> b;
    for (std::size_t i = 0; i + 1 < h.size(); i += 2) {
        b.push_back(static_cast<std::byte>(std::stoul(h.substr(i, 2), nullptr, 16)));
    }
    return b;
}

}  // namespace rig::test::bnxt
