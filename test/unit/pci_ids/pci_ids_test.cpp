// abi/pci_ids.hpp against the kernel's own tables: every function Rig's list names is one the
// family's Linux driver probes (mlx5_core_pci_table in mlx5/core/main.c, bnxt_pci_tbl in
// bnxt/bnxt.c), with the same VF flag, and every mlx5 and every Thor (P5, P7) entry of those
// tables is in Rig's list. The tables are read as the kernel writes them:
//   { PCI_VDEVICE(MELLANOX, 0x1012), MLX5_PCI_DEV_IS_VF},	/* Connect-IB VF */
//   { PCI_VDEVICE(BROADCOM, 0x1806), .driver_data = NETXTREME_E_P5_VF },
// with vendor and named device IDs from include/linux/pci_ids.h.
#include <catch2/catch.hpp>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "abi/pci_ids.hpp"
#include "test/unit/kernel_text.hpp"

namespace pci = rig::abi::pci;

namespace {

std::string kernel_file(const std::string& name) { return rig::test::kernel_file("RIG_KERNEL_PCI_TABLES", name); }

// The body of `static const struct pci_device_id <name>[] = { ... };`
std::string table_body(const std::string& source, const std::string& name) {
    const auto start = source.find(name + "[] = {");
    INFO(name);
    REQUIRE(start != std::string::npos);
    const auto end = source.find("\n};", start);
    REQUIRE(end != std::string::npos);
    return source.substr(start, end - start);
}

// pci_ids.h: "#define PCI_VENDOR_ID_MELLANOX	0x15b3" and the like
std::map<std::string, std::uint16_t> pci_ids_defines() {
    const std::string h = kernel_file("linux_pci_ids.h");
    std::map<std::string, std::uint16_t> out;
    const std::regex def(R"(#define\s+(PCI_\w+)\s+(0x[0-9a-fA-F]+))");
    for (std::sregex_iterator it(h.begin(), h.end(), def), end; it != end; ++it) {
        out[(*it)[1]] = static_cast<std::uint16_t>(std::stoul((*it)[2], nullptr, 16));
    }
    return out;
}

struct kernel_entry {
    std::uint16_t vendor;
    std::uint16_t device;
    bool vf;
    std::string driver_data;   // bnxt: the board ("BCM57508", "NETXTREME_E_P5_VF")
};

// The PCI_VDEVICE entries of a table; `is_vf` decides the VF flag from the rest of the line.
template <class IsVf>
std::vector<kernel_entry> entries(const std::string& body, IsVf is_vf) {
    const auto defines = pci_ids_defines();
    const auto value = [&](const std::string& token, const std::string& prefix) -> std::uint16_t {
        if (token.starts_with("0x")) {
            return static_cast<std::uint16_t>(std::stoul(token, nullptr, 16));
        }
        const auto it = defines.find(prefix + token);
        const auto named = defines.find(token);
        INFO(token);
        REQUIRE((it != defines.end() || named != defines.end()));
        return it != defines.end() ? it->second : named->second;
    };
    std::vector<kernel_entry> out;
    const std::regex vdevice(R"(PCI_VDEVICE\(\s*(\w+)\s*,\s*(\w+)\s*\)([^\n]*))");
    const std::regex driver_data(R"(\.driver_data\s*=\s*(\w+))");
    for (std::sregex_iterator it(body.begin(), body.end(), vdevice), end; it != end; ++it) {
        const std::string rest = (*it)[3];
        std::smatch board;
        std::regex_search(rest, board, driver_data);
        out.push_back({value((*it)[1], "PCI_VENDOR_ID_"), value((*it)[2], ""), is_vf(rest),
                       board.empty() ? std::string() : std::string(board[1])});
    }
    return out;
}

std::vector<kernel_entry> mlx5_core_pci_table() {
    return entries(table_body(kernel_file("mlx5_main.c"), "mlx5_core_pci_table"),
                   [](const std::string& rest) { return rest.find("MLX5_PCI_DEV_IS_VF") != std::string::npos; });
}

std::vector<kernel_entry> bnxt_pci_tbl() {
    return entries(table_body(kernel_file("bnxt.c"), "bnxt_pci_tbl"),
                   [](const std::string& rest) { return rest.find("_VF") != std::string::npos; });
}

// bnxt.c board_info: "[BCM57508] = { "Broadcom BCM57508 NetXtreme-E ..." }"
std::map<std::string, std::string> bnxt_board_names() {
    const std::string c = kernel_file("bnxt.c");
    std::map<std::string, std::string> out;
    const std::regex board(R"re(\[(\w+)\]\s*=\s*\{\s*"([^"]*)")re");
    for (std::sregex_iterator it(c.begin(), c.end(), board), end; it != end; ++it) {
        out[(*it)[1]] = (*it)[2];
    }
    return out;
}

const kernel_entry* find_in(const std::vector<kernel_entry>& table, const pci::device_id& d) {
    for (const kernel_entry& k : table) {
        if (k.vendor == d.vendor && k.device == d.device) {
            return &k;
        }
    }
    return nullptr;
}

std::string lower(std::string s) {
    for (char& c : s) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return s;
}

// Thor: bnxt_pci_tbl's P5 and P7 boards (BCM575xx, BCM576xx and their partitions and VFs)
bool is_thor(const kernel_entry& k) {
    static const std::regex thor(R"(BCM57[56]\d\d.*|NETXTREME_E_P[57]_VF.*)");
    return std::regex_match(k.driver_data, thor);
}

}  // namespace

TEST_CASE("the kernel's tables are read: vendors and sizes as linux 6.12 has them", "[pci_ids]") {
    const auto defines = pci_ids_defines();
    CHECK(defines.at("PCI_VENDOR_ID_MELLANOX") == pci::vendor_mellanox);
    CHECK(defines.at("PCI_VENDOR_ID_BROADCOM") == pci::vendor_broadcom);
    const auto mlx5 = mlx5_core_pci_table();
    const auto bnxt = bnxt_pci_tbl();
    CHECK(mlx5.size() == 25);
    CHECK(bnxt.size() == 73);   // CONFIG_BNXT_SRIOV's VFs included
    for (const kernel_entry& k : mlx5) {
        CHECK(k.vendor == pci::vendor_mellanox);
    }
    for (const kernel_entry& k : bnxt) {
        CHECK(k.vendor == pci::vendor_broadcom);
        CHECK_FALSE(k.driver_data.empty());
    }
    // spot checks of the reading itself: a named ID, a VF flag, a board
    REQUIRE(mlx5.front().device == 0x1011);   // PCI_DEVICE_ID_MELLANOX_CONNECTIB
    CHECK_FALSE(mlx5.front().vf);
    CHECK(mlx5[1].vf);
}

TEST_CASE("every function in Rig's list is in its family's kernel table, with the same VF flag", "[pci_ids]") {
    const auto mlx5 = mlx5_core_pci_table();
    const auto bnxt = bnxt_pci_tbl();
    const auto boards = bnxt_board_names();
    for (const pci::device_id& d : pci::devices) {
        INFO(pci::to_string(d.family) << " " << std::hex << d.vendor << ":" << d.device << " " << d.name);
        const kernel_entry* k = find_in(d.family == pci::family::mlx5 ? mlx5 : bnxt, d);
        REQUIRE(k != nullptr);
        CHECK(k->vf == d.vf);
        if (d.family == pci::family::bnxt) {
            // the part number of Rig's name is the board's ("BCM5750x" in "Broadcom BCM5750X ...")
            CHECK(is_thor(*k));
            const std::string part(d.name.substr(0, d.name.find(' ')));
            REQUIRE(boards.count(k->driver_data) == 1);
            CHECK_THAT(lower(boards.at(k->driver_data)), Catch::Contains(lower(part)));
        }
    }
}

TEST_CASE("every mlx5 function and every Thor function of the kernel's tables is in Rig's list", "[pci_ids]") {
    for (const kernel_entry& k : mlx5_core_pci_table()) {
        INFO(std::hex << k.vendor << ":" << k.device);
        const pci::device_id* d = pci::find(k.vendor, k.device);
        REQUIRE(d != nullptr);
        CHECK(d->family == pci::family::mlx5);
    }
    std::size_t thor = 0;
    for (const kernel_entry& k : bnxt_pci_tbl()) {
        INFO(std::hex << k.vendor << ":" << k.device << " " << k.driver_data);
        const pci::device_id* d = pci::find(k.vendor, k.device);
        if (is_thor(k)) {
            ++thor;
            REQUIRE(d != nullptr);
            CHECK(d->family == pci::family::bnxt);
        } else {
            CHECK(d == nullptr);   // P4 and older, NetXtreme-C/S: not Thor, not driven
        }
    }
    CHECK(thor == 19);
}

TEST_CASE("Rig's list: one entry per function, one vendor per family, the model's IDs in it", "[pci_ids]") {
    std::set<std::pair<std::uint16_t, std::uint16_t>> seen;
    for (const pci::device_id& d : pci::devices) {
        INFO(std::hex << d.vendor << ":" << d.device);
        CHECK(seen.insert({d.vendor, d.device}).second);
        CHECK(d.vendor == (d.family == pci::family::mlx5 ? pci::vendor_mellanox : pci::vendor_broadcom));
        CHECK(pci::find(d.vendor, d.device) == &d);
    }
    CHECK(pci::connectx6dx.vendor == 0x15b3);
    CHECK(pci::connectx6dx.device == 0x101d);
    CHECK(pci::bcm57508.device == 0x1750);
    CHECK(pci::find(0x14e4, 0xd818) == nullptr);   // BCM58818: not in linux 6.12's bnxt_pci_tbl
    CHECK(pci::find(0x8086, 0x1017) == nullptr);   // another vendor's 0x1017
    CHECK(pci::find(0x15b3, 0x1003) == nullptr);   // ConnectX-3: mlx4, not mlx5
    CHECK(pci::to_string(pci::family::mlx5) == "mlx5");
    CHECK(pci::to_string(pci::family::bnxt) == "bnxt");
}
