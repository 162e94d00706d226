// The mlx5 firmware layouts pinned to the kernel's (README, "How the formats are pinned"): every
// layout in rig::mlx5::ifc::all_layouts against the kernel's include/linux/mlx5/mlx5_ifc.h, as
// compiled by a C compiler and written by rdma-core's DEVX_SET (the golden program, see
// gen_golden.cpp).
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "abi/mlx5/ifc.hpp"
#include "golden.hpp"
#include "walk.hpp"

namespace ifc = rig::mlx5::ifc;
using namespace rig::test::mlx5_ifc;

namespace {

const golden_layout& golden_of(const ifc::layout_info& l) {
    const auto& g = load_golden();
    auto it = g.layouts.find(std::string(l.name));
    if (it == g.layouts.end()) {
        throw std::runtime_error(cat(l.name, ": not in the golden file"));
    }
    return it->second;
}

// "create_qp_in (kernel create_qp_in)" or "mbox_in (kernel alloc_pd_in)"
std::string title(const ifc::layout_info& l) {
    return cat(l.name, " (kernel mlx5_ifc_", l.c_name, "_bits)");
}

}  // namespace

TEST_CASE("mlx5_ifc: every layout's size equals the kernel's sizeof", "[mlx5_ifc][golden]") {
    for (const auto& l : ifc::all_layouts) {
        const auto& g = golden_of(l);
        if (g.size_bits != l.size_bits) {
            FAIL_CHECK(cat(title(l), ": size_bits ", hex(l.size_bits), " ours, ", hex(g.size_bits), " kernel"));
        }
    }
}

TEST_CASE("mlx5_ifc: every field's offset and width equal the kernel's", "[mlx5_ifc][golden]") {
    std::size_t checked = 0;
    for (const auto& l : ifc::all_layouts) {
        const auto& g = golden_of(l);
        for (const entry& e : entries(l)) {
            auto it = g.fields.find(e.path);
            if (it == g.fields.end()) {
                FAIL_CHECK(cat(title(l), ".", e.path, ": not in the golden file"));
                continue;
            }
            const auto [off, bits] = it->second;
            if (off != e.f.off || bits != e.f.bits) {
                FAIL_CHECK(cat(title(l), ".", e.path, ": bit offset ", hex(e.f.off), " width ", hex(e.f.bits),
                               " ours, offset ", hex(off), " width ", hex(bits), " kernel"));
            }
            ++checked;
        }
    }
    CHECK(checked > 1000);
}

TEST_CASE("mlx5_ifc: every layout's bytes equal DEVX_SET's over the kernel layout", "[mlx5_ifc][golden]") {
    for (const auto& l : ifc::all_layouts) {
        const auto& g = golden_of(l);
        const auto ours = build_image(l);
        if (ours.size() != g.image.size()) {
            FAIL_CHECK(cat(title(l), ": image of ", ours.size(), " bytes ours, ", g.image.size(), " kernel"));
            continue;
        }
        for (std::size_t i = 0; i < ours.size(); ++i) {
            const auto b = std::to_integer<std::uint8_t>(ours[i]);
            if (b == g.image[i]) {
                continue;
            }
            // Name the leaves that cover the first differing byte.
            std::string where;
            for (const entry& e : entries(l)) {
                if (!e.nested && e.f.off < (i + 1) * 8 && i * 8 < e.f.end()) {
                    where += (where.empty() ? "" : ", ") + e.path;
                }
            }
            FAIL_CHECK(cat(title(l), ": byte ", hex(i), " is ", hex(b), " ours, ", hex(g.image[i]),
                           " kernel; our fields there: ", where.empty() ? "none (reserved)" : where));
            break;
        }
    }
}

TEST_CASE("mlx5_ifc: flexible arrays start where the kernel's do", "[mlx5_ifc][golden]") {
    const auto& g = load_golden();
    for (const auto& fa : ifc::flex_arrays) {
        const std::string key = cat(fa.c_name, " ", fa.path);
        auto it = g.flex.find(key);
        REQUIRE(it != g.flex.end());
        const auto [off, bits] = it->second;
        if (off != fa.first.off || bits != fa.first.bits) {
            FAIL_CHECK(cat(fa.c_name, ".", fa.path, "[0]: bit offset ", hex(fa.first.off), " width ", fa.first.bits,
                           " ours, ", hex(off), " width ", bits, " kernel"));
        }
    }
}

TEST_CASE("mlx5_ifc: opcodes, event types and enumerations equal the kernel's", "[mlx5_ifc][golden]") {
    const auto& g = load_golden();
    const auto check = [&](const std::string& name, std::uint64_t ours) {
        auto it = g.constants.find(name);
        if (it == g.constants.end()) {
            FAIL_CHECK(name + ": not in the golden file");
        } else if (it->second != ours) {
            FAIL_CHECK(cat(name, ": ", hex(ours), " ours, ", hex(it->second), " kernel"));
        }
    };
    for (const auto op : ifc::all_opcodes) {
        check(cat("MLX5_CMD_OP_", ifc::to_string(op)), static_cast<std::uint64_t>(op));
    }
    for (const auto& ev : ifc::event_type_codings) {
        check(cat("MLX5_EVENT_TYPE_CODING_", ev.coding), static_cast<std::uint64_t>(ev.type));
    }
    for (const auto& k : ifc::kernel_constants) {
        check(std::string(k.c_name), k.value);
    }
}

// The golden program can only check the fields we declare; this one reads the header's text
// and checks that each struct's named members (reserved_at_* and flexible arrays aside) are
// all declared. C unions are partial on purpose (only the members we use).
TEST_CASE("mlx5_ifc: every named member of each kernel struct is declared", "[mlx5_ifc][golden]") {
    const std::string path = env_path("MLX5_IFC_HEADER");
    std::ifstream in(path);
    REQUIRE(in);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    const std::regex member(R"(^\s*(?:u8|struct\s+mlx5_ifc_\w+_bits|union\s+mlx5_ifc_\w+_bits)\s+(\w+)\s*(\[[^;]*)?;)");
    for (const auto& l : ifc::all_layouts) {
        if (l.is_union) {
            continue;
        }
        const std::string head = cat("struct mlx5_ifc_", l.c_name, "_bits {");
        const auto at = text.find(head);
        REQUIRE(at != std::string::npos);
        const auto end = text.find("\n};", at);
        std::istringstream body(text.substr(at + head.size(), end - at - head.size()));
        std::set<std::string> ours;
        for (const auto& nf : l.fields) {
            ours.insert(std::string(nf.name));
        }
        std::string line;
        while (std::getline(body, line)) {
            std::smatch m;
            if (!std::regex_search(line, m, member)) {
                continue;
            }
            const std::string name = m[1];
            const std::string dims = m[2];
            const bool flexible = dims.starts_with("[]") || dims.starts_with("[0]");
            if (name.starts_with("reserved_at_") || flexible) {
                continue;
            }
            if (!ours.contains(name)) {
                FAIL_CHECK(cat(title(l), ": the kernel's member ", name, " is not declared"));
            }
        }
    }
}
