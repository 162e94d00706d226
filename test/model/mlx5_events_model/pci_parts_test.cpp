// The family-neutral pieces of a PCI function model as pieces (sim/pci): the config space store
// (IDs, BAR sizing 32- and 64-bit, write masks, the capability chain), the MSI-X table and PBA
// as trapped BAR storage, and the fault plan's parse in a family's space. The mlx5 model's use
// of them is pci_test.cpp's and events_model_test.cpp's.
#include <array>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

#include "sim/family.hpp"
#include "sim/mlx5/function_model.hpp"
#include "sim/pci/config_space.hpp"
#include "sim/pci/fault_plan.hpp"
#include "sim/pci/msix.hpp"

namespace {

namespace pci = rig::sim::pci;

std::uint32_t read32(const pci::config_space& c, std::uint64_t at) {
    std::array<std::byte, 4> b{};
    c.read(at, b);
    return std::to_integer<std::uint32_t>(b[0]) | std::to_integer<std::uint32_t>(b[1]) << 8 |
           std::to_integer<std::uint32_t>(b[2]) << 16 | std::to_integer<std::uint32_t>(b[3]) << 24;
}
std::uint16_t read16(const pci::config_space& c, std::uint64_t at) {
    return static_cast<std::uint16_t>(read32(c, at & ~3ull) >> (8 * (at & 2)));
}
pci::write_effect write32(pci::config_space& c, std::uint64_t at, std::uint32_t v) {
    std::array<std::byte, 4> b;
    for (unsigned i = 0; i < 4; ++i) {
        b[i] = static_cast<std::byte>(v >> (8 * i));
    }
    return c.write(at, b);
}
void write16(pci::config_space& c, std::uint64_t at, std::uint16_t v) {
    const std::array<std::byte, 2> b{static_cast<std::byte>(v & 0xff), static_cast<std::byte>(v >> 8)};
    c.write(at, b);
}

// A bnxt-like face: 14e4:1750, BAR0 64 KiB 64-bit, BAR2 1 MiB 64-bit, BAR4 a 32-bit 16 KiB.
pci::config_space thor_like() {
    pci::config_space c({.vendor = 0x14e4, .device = 0x1750, .subsystem = 0x5208, .class_code = 0x020000,
                         .revision = 0x11});
    c.set_bar(0, {.size = 64 << 10, .is_64bit = true, .prefetchable = true});
    c.set_bar(2, {.size = 1 << 20, .is_64bit = true, .prefetchable = false});
    c.set_bar(4, {.size = 16 << 10, .is_64bit = false, .prefetchable = false});
    c.add_express(0x48, {.max = {}, .current = {pci::link_speed::gt8, 8}});
    c.add_msix(0xa0, {.vectors = 74, .table_bar = 4, .table_offset = 0, .pba_bar = 4, .pba_offset = 0x2000});
    c.add_vendor(0xc0, 0x14);
    return c;
}

}  // namespace

TEST_CASE("pci config space: IDs, class, revision, subsystem as given; status says a capability list",
          "[model][pci]") {
    const auto c = thor_like();
    CHECK(read32(c, 0x00) == 0x175014e4u);
    CHECK(read32(c, 0x08) == 0x02000011u);  // class 020000, revision 0x11
    CHECK(read32(c, 0x2c) == 0x520814e4u);  // subsystem vendor defaults to the vendor
    CHECK(read16(c, 0x06) == 0x0010);
    CHECK(read32(c, 0x100) == 0);  // no extended capability
    CHECK(c.bytes().size() == 4096);
}

TEST_CASE("pci config space: BAR sizing answers all ones as hardware does, 64- and 32-bit", "[model][pci]") {
    auto c = thor_like();
    // the type bits before any write: 64-bit prefetchable, 64-bit, 32-bit non-prefetchable
    CHECK(read32(c, 0x10) == 0xc);
    CHECK(read32(c, 0x18) == 0x4);
    CHECK(read32(c, 0x20) == 0x0);
    // __pci_read_base: all ones, read back, the size is ~value + 1
    for (std::uint64_t at = 0x10; at < 0x28; at += 4) {
        write32(c, at, 0xffffffff);
    }
    CHECK(read32(c, 0x10) == 0xffff000cu);  // 64 KiB
    CHECK(read32(c, 0x14) == 0xffffffffu);  // upper half: every bit an address bit
    CHECK(read32(c, 0x18) == 0xfff00004u);  // 1 MiB, not prefetchable
    CHECK(read32(c, 0x1c) == 0xffffffffu);
    CHECK(read32(c, 0x20) == 0xffffc000u);  // 16 KiB, 32-bit
    CHECK(read32(c, 0x24) == 0);            // BAR5 unused: reads 0, takes nothing
    // an address: the low bits the size leaves read 0, the type bits stay
    write32(c, 0x10, 0xfe12345f);
    write32(c, 0x14, 0x00000012);
    CHECK(read32(c, 0x10) == 0xfe12000cu);
    CHECK(c.bar_address(0) == 0x12fe120000ull);
    write32(c, 0x20, 0xdead0001);
    CHECK(read32(c, 0x20) == 0xdead0000u);
    CHECK(c.bar_address(4) == 0xdead0000ull);
    CHECK(c.bar_address(1) == 0);  // the upper half of BAR0 is no BAR
    // a BAR over 4 GiB masks its upper dword too
    pci::config_space big({.vendor = 1, .device = 2});
    big.set_bar(0, {.size = std::uint64_t{16} << 30});
    write32(big, 0x10, 0xffffffff);
    write32(big, 0x14, 0xffffffff);
    CHECK(read32(big, 0x10) == 0x0000000cu);
    CHECK(read32(big, 0x14) == 0xfffffffcu);  // 16 GiB
    // misuse
    CHECK_THROWS_AS(big.set_bar(1, {.size = 4096}), std::invalid_argument);  // the upper half of BAR0
    CHECK_THROWS_AS(big.set_bar(5, {.size = 4096, .is_64bit = true}), std::invalid_argument);
    CHECK_THROWS_AS(big.set_bar(2, {.size = 3000}), std::invalid_argument);
    CHECK_THROWS_AS(big.set_bar(2, {.size = std::uint64_t{4} << 30, .is_64bit = false}), std::invalid_argument);
}

TEST_CASE("pci config space: the command register, read-only fields and a reset", "[model][pci]") {
    auto c = thor_like();
    write16(c, 0x04, 0xffff);
    CHECK(read16(c, 0x04) == 0x0406);  // memory space, bus master, INTx disable
    CHECK(c.memory_enabled());
    CHECK(c.bus_master());
    write32(c, 0x00, 0);      // IDs are read-only
    write16(c, 0x06, 0xffff);  // so is status
    write32(c, 0x30, 0xffffffff);  // no expansion ROM
    write32(c, 0x3c, 0xffffffff);  // interrupt line/pin read 0, as the mlx5 model always had them
    write32(c, 0x200, 0xffffffff);  // extended space
    CHECK(read32(c, 0x00) == 0x175014e4u);
    CHECK(read16(c, 0x06) == 0x0010);
    CHECK(read32(c, 0x30) == 0);
    CHECK(read32(c, 0x3c) == 0);
    CHECK(read32(c, 0x200) == 0);
    // MSI-X: enable and function mask only
    write16(c, 0xa2, 0xffff);
    CHECK(read16(c, 0xa2) == 0xc000 + 73);
    CHECK(c.msix_enabled());
    CHECK(c.msix_function_masked());
    write32(c, 0x10, 0xfe000000);
    c.reset();
    CHECK(read16(c, 0x04) == 0);
    CHECK(read16(c, 0xa2) == 73);
    CHECK_FALSE(c.msix_enabled());
    CHECK(read32(c, 0x10) == 0xfe00000cu);  // the BAR's address stays
}

TEST_CASE("pci config space: the capability chain walks in the order added, each capability's fields",
          "[model][pci]") {
    auto c = thor_like();
    std::vector<std::pair<std::uint8_t, std::uint32_t>> chain;  // pci_find_capability's walk
    for (std::uint32_t at = read16(c, 0x34) & 0xfc; at != 0 && chain.size() < 48; at = (read16(c, at) >> 8) & 0xfc) {
        chain.emplace_back(static_cast<std::uint8_t>(read16(c, at) & 0xff), at);
    }
    const std::vector<std::pair<std::uint8_t, std::uint32_t>> want = {{0x10, 0x48}, {0x11, 0xa0}, {0x09, 0xc0}};
    CHECK(chain == want);
    CHECK((read16(c, 0x48 + 2) & 0xf) == 2);       // PCI Express v2, an endpoint
    CHECK((read16(c, 0x48 + 0x12) & 0xf) == 3);     // Link Status: 8 GT/s
    CHECK((read16(c, 0x48 + 0x12) >> 4 & 0x3f) == 8);
    CHECK(read32(c, 0xa4) == 0x00000004u);  // table: offset 0, BIR 4
    CHECK(read32(c, 0xa8) == 0x00002004u);  // PBA: offset 0x2000, BIR 4
    CHECK((read32(c, 0xc0) >> 16 & 0xff) == 0x14);  // the vendor capability's length
    // Initiate FLR comes back as an effect and reads 0
    CHECK(write32(c, 0x48 + 8, 0x8000u).flr);
    CHECK((read16(c, 0x48 + 8) & 0x8000) == 0);
    CHECK_FALSE(write32(c, 0x48 + 8, 0x0010u).flr);
    // misuse: inside the header, out of order, twice
    pci::config_space d({.vendor = 1, .device = 2});
    CHECK_THROWS_AS(d.add_vendor(0x3c, 4), std::invalid_argument);
    d.add_vendor(0x80, 4);
    CHECK_THROWS_AS(d.add_vendor(0x60, 4), std::invalid_argument);
    d.add_msix(0x90, {.vectors = 1, .table_offset = 0, .pba_offset = 0x1000});
    CHECK_THROWS_AS(d.add_msix(0xa0, {.vectors = 1}), std::invalid_argument);
}

TEST_CASE("pci MSI-X: table entries are storage, the PBA reads 0 and takes nothing, a reset clears",
          "[model][pci]") {
    pci::msix_table m({.vectors = 74, .table_bar = 4, .table_offset = 0, .pba_bar = 4, .pba_offset = 0x2000});
    CHECK(pci::msix_table_window(74) == 0x1000);  // 74 x 16 bytes, one page
    CHECK(pci::msix_pba_window(74) == 0x1000);
    CHECK(pci::msix_table_window(2048) == 0x8000);
    CHECK(m.contains(4, 0x0, 4));
    CHECK(m.contains(4, 0xffc, 8));
    CHECK_FALSE(m.contains(4, 0x1000, 0x1000));  // between the windows
    CHECK(m.contains(4, 0x2000, 8));
    CHECK_FALSE(m.contains(4, 0x3000, 4));
    CHECK_FALSE(m.contains(0, 0x0, 4));  // another BAR
    // vector 3: address 0xfee01000:0x1, data 0x4041, masked
    const std::array<std::byte, 16> entry{std::byte{0x00}, std::byte{0x10}, std::byte{0xe0}, std::byte{0xfe},
                                          std::byte{0x01}, std::byte{0x00}, std::byte{0x00}, std::byte{0x00},
                                          std::byte{0x41}, std::byte{0x40}, std::byte{0x00}, std::byte{0x00},
                                          std::byte{0x01}, std::byte{0x00}, std::byte{0x00}, std::byte{0x00}};
    m.write(4, 3 * 16, entry);
    CHECK(m.address(3) == 0x1fee01000ull);
    CHECK(m.data(3) == 0x4041u);
    CHECK(m.masked(3));
    CHECK_FALSE(m.masked(2));
    std::array<std::byte, 16> back{};
    m.read(4, 3 * 16, back);
    CHECK(back == entry);
    // the pad after the last vector in the table's page is storage too (as the mlx5 model had it)
    const std::array<std::byte, 4> pad{std::byte{9}, std::byte{8}, std::byte{7}, std::byte{6}};
    std::array<std::byte, 4> got{};
    m.write(4, 0xff0, pad);
    m.read(4, 0xff0, got);
    CHECK(got == pad);
    // the PBA: nothing pending, writes vanish
    m.write(4, 0x2000, pad);
    m.read(4, 0x2000, got);
    CHECK(got == std::array<std::byte, 4>{});
    m.reset();
    m.read(4, 3 * 16, back);
    CHECK(back == std::array<std::byte, 16>{});
    CHECK_FALSE(m.masked(3));
    CHECK(m.address(74) == 0);  // out of range
    // misuse
    CHECK_THROWS_AS(pci::msix_table({.vectors = 0}), std::invalid_argument);
    CHECK_THROWS_AS(pci::msix_table({.vectors = 2049, .pba_offset = 0x10000}), std::invalid_argument);
    CHECK_THROWS_AS(pci::msix_table({.vectors = 64, .table_offset = 0, .pba_offset = 0x800}), std::invalid_argument);
    CHECK_THROWS_AS(pci::msix_table({.vectors = 1, .table_offset = 4, .pba_offset = 0x1000}), std::invalid_argument);
}

TEST_CASE("pci fault plan: --fault-fail in a family's opcode and status space, errors naming what was wrong",
          "[model][pci]") {
    const rig::sim::family* mlx5 = rig::sim::find_family("mlx5");
    const rig::sim::family* bnxt = rig::sim::find_family("bnxt");
    REQUIRE(mlx5 != nullptr);
    REQUIRE(bnxt != nullptr);
    const auto fail = [](std::string_view text, const rig::sim::family* f) { return pci::parse_fault_fail(text, f->faults); };
    const auto error = [&](std::string_view text, const rig::sim::family* f) {
        const auto r = fail(text, f);
        REQUIRE_FALSE(r.has_value());
        return r.error();
    };
    // mlx5: cmdq, the default syndrome 0x4dfa0000 (what rig-nicsim always gave)
    auto m = fail("0x761:3", mlx5);
    REQUIRE(m.has_value());
    CHECK(m->channel == 0);
    CHECK(m->opcode == 0x761);
    CHECK(m->status == 3);
    CHECK(m->syndrome == 0x4dfa0000u);
    m = fail("cmdq:0x10d:0x5:0xffffffff", mlx5);
    REQUIRE(m.has_value());
    CHECK(m->syndrome == 0xffffffffu);
    CHECK(error("hwrm:0x193:0x2", mlx5) == "mlx5 has no channel 'hwrm' (its channels: cmdq)");
    CHECK(error("0x10000:1", mlx5) == "opcode '0x10000' is out of range 0x0..0xffff");
    CHECK(error("0x10d:0x100", mlx5) == "status '0x100' is out of range 0x1..0xff");
    CHECK(error("0x10d:0", mlx5) == "status '0' is out of range 0x1..0xff");
    CHECK(error("0x10d:3:0x100000000", mlx5) == "syndrome '0x100000000' is out of range 0x0..0xffffffff");
    CHECK(error("0x10d:99999999999999999999999", mlx5) ==
          "status '99999999999999999999999' is out of range 0x1..0xff");
    CHECK(error("0x10d:0x", mlx5) == "status '0x' is not a number (decimal or 0x hex)");
    CHECK(error("0x10d:-3", mlx5) == "status '-3' is not a number (decimal or 0x hex)");
    CHECK(error("0x10d", mlx5) == "expected [CHANNEL:]OP:STATUS[:SYNDROME]");
    CHECK(error("1:2:3:4", mlx5) == "expected [CHANNEL:]OP:STATUS[:SYNDROME]");
    CHECK(error("", mlx5) == "expected [CHANNEL:]OP:STATUS[:SYNDROME]");
    // bnxt: hwrm the main channel (16-bit req_type and error_code, cmd_err 8-bit), rcfw 8-bit
    auto b = fail("0x193:0x2", bnxt);
    REQUIRE(b.has_value());
    CHECK(b->channel == 0);
    CHECK(b->opcode == 0x193);
    CHECK(b->status == 2);
    CHECK(b->syndrome == 0);
    b = fail("hwrm:0x193:0xffff:7", bnxt);
    REQUIRE(b.has_value());
    CHECK(b->status == 0xffff);
    CHECK(b->syndrome == 7);
    b = fail("rcfw:0x1:0x5", bnxt);
    REQUIRE(b.has_value());
    CHECK(b->channel == 1);
    CHECK(b->opcode == 1);
    CHECK(b->status == 5);
    CHECK(error("rcfw:0x100:1", bnxt) == "opcode '0x100' is out of range 0x0..0xff");
    CHECK(error("rcfw:1:5:1", bnxt) == "bnxt channel rcfw takes no syndrome (expected rcfw:OP:STATUS)");
    CHECK(error("hwrm:0x193:0x10000", bnxt) == "error_code '0x10000' is out of range 0x1..0xffff");
    CHECK(error("hwrm:0x193:2:0x100", bnxt) == "syndrome '0x100' is out of range 0x0..0xff");
    CHECK(error("cmdq:1:2", bnxt) == "bnxt has no channel 'cmdq' (its channels: hwrm, rcfw)");
    CHECK(error("0x10000:2", bnxt) == "req_type '0x10000' is out of range 0x0..0xffff");
    // fatal's argument: mlx5's health syndrome
    CHECK(pci::parse_fault_fatal("0x8", mlx5->faults).value() == 8u);
    CHECK(pci::parse_fault_fatal("0", mlx5->faults).error() == "health syndrome '0' is out of range 0x1..0xff");
    CHECK(pci::parse_fault_fatal("256", mlx5->faults).error() == "health syndrome '256' is out of range 0x1..0xff");
}

TEST_CASE("pci fault plan: armed at every reset, strikes once at its count; mlx5's form of it", "[model][pci]") {
    pci::fault_arm arm(pci::fault_kind::silence, 3);
    CHECK_FALSE(arm.strike(2).has_value());
    CHECK(arm.strike(3) == pci::fault_kind::silence);
    CHECK_FALSE(arm.strike(4).has_value());  // once
    CHECK(arm.struck());
    arm.rearm();
    CHECK(arm.strike(5) == pci::fault_kind::silence);
    CHECK_FALSE(pci::fault_arm().strike(100).has_value());  // none
    const auto p = rig::sim::mlx5::to_fault_plan({.what = pci::fault_kind::fail_command,
                                                 .after_commands = 7,
                                                 .fatal_code = 0x8,
                                                 .fail = {.channel = 0, .opcode = 0x761, .status = 3, .syndrome = 0xab}});
    CHECK(p.what == rig::sim::mlx5::fault_plan::kind::fail_command);
    CHECK(p.after_commands == 7);
    CHECK(p.health_syndrome == 0x8);
    CHECK(p.opcode == 0x761);
    CHECK(p.status == rig::mlx5::ifc::cmd_status::bad_param_err);
    CHECK(p.syndrome == 0xabu);
}

TEST_CASE("sim family table: mlx5 first and built, bnxt listed, options by family", "[model][pci]") {
    const auto all = rig::sim::families();
    REQUIRE(all.size() >= 2);
    CHECK(all[0].name == "mlx5");
    CHECK(all[0].make != nullptr);
    CHECK(rig::sim::find_family("mlx4") == nullptr);
    CHECK(rig::sim::family_names().starts_with("mlx5, bnxt"));
    CHECK(all[0].takes("--page-request-after"));
    CHECK(all[0].takes("--report-ledger"));
    CHECK_FALSE(rig::sim::find_family("bnxt")->takes("--page-request-after"));
    CHECK_FALSE(rig::sim::find_family("bnxt")->takes("--trapped-uar-pages"));
}
