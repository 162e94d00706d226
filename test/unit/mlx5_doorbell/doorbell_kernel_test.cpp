// abi/mlx5/doorbell.hpp against the kernel's mlx5_core (linux-source-6.12), read as text:
//  - the UAR page: include/linux/mlx5/device.h MLX5_ADAPTER_PAGE_SHIFT (a UAR is one adapter
//    page; uar.c places UAR n at n << MLX5_ADAPTER_PAGE_SHIFT);
//  - the EQ doorbells: core/eq.c MLX5_EQ_DOORBELL_OFFSET, and lib/eq.h eq_update_ci, which
//    writes eq->doorbell + (arm ? 0 : 2), in __be32 words, so the no-arm word is 8 bytes on;
//  - the CQ arm doorbell and the first BlueFlame register: doorbell.h MLX5_CQ_DOORBELL and
//    MLX5_BF_OFFSET; device.h MLX5_BFREGS_PER_UAR.
// These are the values the driver (qp/, firmware/mlx5/events.cpp) and the model
// (sim/mlx5/events.cpp, doorbells.cpp) take from abi: a wrong one would be wrong on both sides.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "abi/mlx5/doorbell.hpp"
#include "test/unit/kernel_text.hpp"

namespace abi = rig::mlx5::abi;

namespace {

std::string kernel_file(const std::string& name) { return rig::test::kernel_file("RIG_KERNEL_DOORBELL_SOURCES", name); }

// The value of `name` as `#define NAME value` or as an enumerator `NAME = value,`.
std::uint64_t kernel_constant(const std::string& file, const std::string& name) {
    const std::string text = kernel_file(file);
    const std::regex def("(?:#define\\s+" + name + "\\s+|\\b" + name + "\\s*=\\s*)(0x[0-9a-fA-F]+|[0-9]+)");
    std::smatch m;
    INFO(name << " in " << file);
    REQUIRE(std::regex_search(text, m, def));
    return std::stoull(m[1], nullptr, 0);
}

}  // namespace

TEST_CASE("the UAR page is the kernel's adapter page", "[mlx5][doorbell][vendor]") {
    const auto shift = kernel_constant("mlx5_device.h", "MLX5_ADAPTER_PAGE_SHIFT");
    CHECK(abi::uar_page_size == (std::uint64_t{1} << shift));
    CHECK(abi::uar::bfregs_per_uar == kernel_constant("mlx5_device.h", "MLX5_BFREGS_PER_UAR"));
}

TEST_CASE("the EQ doorbells are where the kernel's eq_update_ci writes them", "[mlx5][doorbell][vendor]") {
    CHECK(abi::uar::eq_doorbell_arm == kernel_constant("mlx5_eq.c", "MLX5_EQ_DOORBELL_OFFSET"));
    // eq->doorbell + (arm ? 0 : 2): __be32 words past the doorbell
    const std::string eq_h = kernel_file("mlx5_lib_eq.h");
    std::smatch m;
    REQUIRE(std::regex_search(eq_h, m, std::regex(R"((__be32)\s+__iomem\s+\*addr\s*=\s*eq->doorbell\s*\+\s*\(arm\s*\?\s*(\d+)\s*:\s*(\d+)\))")));
    CHECK(m[1] == "__be32");
    const std::uint64_t word = 4;
    CHECK(std::stoull(m[2]) == 0);   // the arm word is the doorbell itself
    CHECK(abi::uar::eq_doorbell_no_arm == abi::uar::eq_doorbell_arm + std::stoull(m[3]) * word);
    // and the value written: (cons_index & 0xffffff) | (eqn << 24)
    CHECK(std::regex_search(eq_h, std::regex(R"(\(eq->cons_index\s*&\s*0xffffff\)\s*\|\s*\(eq->eqn\s*<<\s*24\))")));
    CHECK(abi::eq_doorbell(0x12, 0x1abcdef) == ((0x1abcdefu & 0xffffff) | (0x12u << 24)));
}

TEST_CASE("the CQ arm doorbell and the first BlueFlame register are the kernel's", "[mlx5][doorbell][vendor]") {
    CHECK(abi::uar::cq_doorbell == kernel_constant("mlx5_doorbell.h", "MLX5_CQ_DOORBELL"));
    CHECK(abi::uar::bf_offset == kernel_constant("mlx5_doorbell.h", "MLX5_BF_OFFSET"));
}
