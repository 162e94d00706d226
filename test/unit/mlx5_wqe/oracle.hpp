#pragma once
// Runs test/unit/mlx5_wqe/mlx5dv_oracle.c (built against rdma-core's mlx5dv.h) on a batch of
// requests and returns its output lines. The oracle's path comes from RIG_MLX5DV_ORACLE, set by
// meson for this suite.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

namespace rig::test {

inline std::vector<std::string> run_mlx5dv_oracle(const std::string& requests) {
    const char* oracle = std::getenv("RIG_MLX5DV_ORACLE");
    if (oracle == nullptr) {
        throw std::runtime_error("RIG_MLX5DV_ORACLE is not set (run this suite through meson test)");
    }
    char path[] = "/tmp/rig-mlx5dv-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) {
        throw std::runtime_error("mkstemp failed");
    }
    close(fd);
    std::ofstream(path) << requests;
    const std::string cmd = std::string(oracle) + " < " + path;
    FILE* p = popen(cmd.c_str(), "r");
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
        throw std::runtime_error("the mlx5dv oracle failed with status " + std::to_string(status));
    }
    return lines;
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

}  // namespace rig::test
