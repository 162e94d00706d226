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

namespace rig::test::bnxt {

inline std::vector<std::string> run_oracle(const std::string& args, const std::string& input) {
    const char* oracle = std::getenv("RIG_BNXT_ORACLE");
    if (oracle == nullptr) {
        throw std::runtime_error("RIG_BNXT_ORACLE is not set (run this suite through meson test)");
    }
    char path[] = "/tmp/rig-bnxt-oracle-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) {
        throw std::runtime_error("mkstemp failed");
    }
    close(fd);
    std::ofstream(path) << input;
    const std::string cmd = std::string(oracle) + " " + args + " < " + path;
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) {
        unlink(path);
        throw std::runtime_error("cannot run " + cmd);
    }
    std::vector<std::string> lines;
    std::string line;
    for (int c; (c = std::fgetc(p)) != EOF;) {
        if (c == '\n') {
            lines.push_back(line);
            line.clear();
        } else {
            line.push_back(static_cast<char>(c));
        }
    }
    const int status = pclose(p);
    unlink(path);
    if (status != 0) {
        throw std::runtime_error("the bnxt oracle failed with status " + std::to_string(status));
    }
    return lines;
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

inline std::string to_hex(const std::byte* p, std::size_t n) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s;
    for (std::size_t i = 0; i < n; ++i) {
        const auto b = static_cast<unsigned>(p[i]);
        s.push_back(digits[b >> 4]);
        s.push_back(digits[b & 15]);
    }
    return s;
}

inline std::vector<std::byte> from_hex(const std::string& h) {
    std::vector<std::byte> b;
    for (std::size_t i = 0; i + 1 < h.size(); i += 2) {
        b.push_back(static_cast<std::byte>(std::stoul(h.substr(i, 2), nullptr, 16)));
    }
    return b;
}

}  // namespace rig::test::bnxt
