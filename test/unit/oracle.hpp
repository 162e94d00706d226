#pragma once
// Runs a vendor oracle: a C program the build compiled against a vendor's own header (rdma-core's
// mlx5dv.h, the kernel's bnxt_hsi.h/roce_hsi.h), with requests on its stdin, and returns its
// output lines. Its path comes from the environment variable meson sets for the suite.
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

namespace rig::test {

inline std::vector<std::string> run_oracle(const char* env, const std::string& args,
                                           const std::string& input) {
    const char* oracle = std::getenv(env);
    if (oracle == nullptr) {
        throw std::runtime_error(std::string(env) + " is not set (run this suite through meson test)");
    }
    char path[] = "/tmp/rig-oracle-XXXXXX";
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
        throw std::runtime_error(std::string(oracle) + " failed with status " + std::to_string(status));
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
