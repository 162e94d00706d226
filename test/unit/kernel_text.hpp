#pragma once
// A file of the kernel source the build extracted (test/vendor/extract-*), read whole as text:
// the directory comes from the environment variable the test's meson.build sets. Tests that
// read the kernel's own tables and constants (pci_ids, mlx5_doorbell) use it.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace rig::test {

inline std::string kernel_file(const char* directory_variable, const std::string& name) {
    const char* dir = std::getenv(directory_variable);
    INFO(directory_variable);
    REQUIRE(dir != nullptr);
    std::ifstream in(std::string(dir) + "/" + name);
    INFO(std::string(dir) + "/" + name);
    REQUIRE(in);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace rig::test
