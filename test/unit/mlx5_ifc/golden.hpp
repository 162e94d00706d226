#pragma once
// Reads the golden description written by the C program that test/unit/mlx5_ifc/gen_golden.cpp
// generates (its path in $MLX5_IFC_GOLDEN): sizes, offsets and byte images of every layout as
// the kernel's mlx5_ifc.h and rdma-core's DEVX_SET make them.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rig::test::mlx5_ifc {

struct golden_layout {
    std::uint64_t size_bits = 0;
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> fields;  // path -> off, bits
    std::vector<std::uint8_t> image;
};

struct golden {
    std::map<std::string, golden_layout> layouts;
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> flex;  // "c_name path"
    std::map<std::string, std::uint64_t> constants;
};

inline std::string env_path(const char* var) {
    const char* p = std::getenv(var);
    if (p == nullptr || *p == '\0') {
        throw std::runtime_error(std::string("$") + var + " is not set: run this test through meson test");
    }
    return p;
}

inline const golden& load_golden() {
    static const golden g = [] {
        const std::string path = env_path("MLX5_IFC_GOLDEN");
        std::ifstream in(path);
        if (!in) {
            throw std::runtime_error("cannot read " + path);
        }
        golden out;
        std::string line;
        while (std::getline(in, line)) {
            std::istringstream ls(line);
            std::string kind, name;
            ls >> kind >> name;
            if (kind == "layout") {
                ls >> out.layouts[name].size_bits;
            } else if (kind == "field") {
                std::string p;
                std::uint64_t off = 0, bits = 0;
                ls >> p >> off >> bits;
                out.layouts[name].fields[p] = {off, bits};
            } else if (kind == "image") {
                std::string hex;
                ls >> hex;
                auto& img = out.layouts[name].image;
                for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
                    img.push_back(static_cast<std::uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
                }
            } else if (kind == "flex") {
                std::string p;
                std::uint64_t off = 0, bits = 0;
                ls >> p >> off >> bits;
                out.flex[name + " " + p] = {off, bits};
            } else if (kind == "const") {
                ls >> out.constants[name];
            }
        }
        if (out.layouts.empty()) {
            throw std::runtime_error(path + " holds no layout");
        }
        return out;
    }();
    return g;
}

}  // namespace rig::test::mlx5_ifc
