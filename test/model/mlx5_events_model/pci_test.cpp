// The mlx5 function model's PCI configuration space as the kernel's PCI core and mlx5_core read
// it (sim/mlx5/config_space.cpp on sim/pci/config_space.hpp and express.hpp; sim/mlx5/vsc.hpp):
// BAR0 sizing, the capability chain, the PCI Express capability (link, FLR), the vendor-specific
// gateway of lib/pci_vsc.c.
#include <array>
#include <chrono>
#include <cstring>
#include <thread>

#include <catch2/catch.hpp>

#include "abi/bits.hpp"
#include "abi/mlx5/ifc.hpp"
#include "driver/function.hpp"
#include "firmware/mlx5/hca.hpp"
#include "sim/mlx5/function_model.hpp"
#include "test/model/served_model.hpp"

namespace {

using namespace std::chrono_literals;
namespace drv = rig::driver;
namespace fw = rig::firmware::mlx5;
namespace model = rig::sim::mlx5;

model::function_options fast() {
    model::function_options o;
    o.init_time = 1ms;
    o.firmware.boot_pages = 2;
    o.firmware.init_pages = 2;
    return o;
}

std::uint32_t read32(drv::function& f, std::uint32_t at) { return f.config_read32(at).value(); }
void write32(drv::function& f, std::uint32_t at, std::uint32_t v) {
    std::array<std::byte, 4> b;
    for (unsigned i = 0; i < 4; ++i) {
        b[i] = static_cast<std::byte>(v >> (8 * i));  // config space is little-endian
    }
    REQUIRE(f.config_write(at, b).has_value());
}

// pci_find_capability: the offset of capability `id`, 0 when absent
std::uint32_t find_cap(drv::function& f, std::uint8_t id) {
    std::uint32_t at = f.config_read16(0x34).value() & 0xfc;
    for (int hops = 0; at != 0 && hops < 48; ++hops) {
        const std::uint16_t w = f.config_read16(at).value();
        if ((w & 0xff) == id) {
            return at;
        }
        at = (w >> 8) & 0xfc;
    }
    return 0;
}

TEST_CASE("mlx5 model PCI: an Express endpoint at 16 GT/s x16 with FLR, a vendor-specific capability, 4 KiB",
          "[model][mlx5]") {
    rig::test::served_model t(fast());
    auto info = t.f->get_region_info(drv::region::config);
    REQUIRE(info.has_value());
    CHECK(info->size == 4096);  // QEMU's client keeps a PCIe capability only with 4 KiB
    CHECK(find_cap(*t.f, 0x11) == model::msix_cap_offset);
    const std::uint32_t x = find_cap(*t.f, 0x10);
    REQUIRE(x == model::express_cap_offset);
    CHECK(find_cap(*t.f, 0x09) == model::vsc_cap_offset);
    const std::uint16_t flags = t.f->config_read16(x + 2).value();
    CHECK((flags & 0xf) == 2);           // PCI_EXP_FLAGS_VERS 2
    CHECK((flags >> 4 & 0xf) == 0);      // PCI_EXP_TYPE_ENDPOINT
    const std::uint32_t devcap = read32(*t.f, x + 4);
    CHECK((devcap & 0x10000000) != 0);   // PCI_EXP_DEVCAP_FLR
    CHECK((devcap & 0x7) == 2);          // Max_Payload_Size 512
    CHECK((devcap & 0x8000) != 0);       // PCI_EXP_DEVCAP_RBER: a PCIe 1.1+ device (aspm.c)
    const std::uint32_t lnkcap = read32(*t.f, x + 0x0c);
    CHECK((lnkcap & 0xf) == 4);          // 16 GT/s
    CHECK((lnkcap >> 4 & 0x3f) == 16);   // x16
    const std::uint16_t lnksta = t.f->config_read16(x + 0x12).value();
    CHECK((lnksta & 0xf) == 4);
    CHECK((lnksta >> 4 & 0x3f) == 16);
    CHECK(read32(*t.f, x + 0x2c) == 0x1e);  // LNKCAP2: 2.5, 5, 8 and 16 GT/s
    CHECK(read32(*t.f, 0x100) == 0);        // no extended capability
    // Initiate FLR reads 0; the writable part of Device Control reads back
    REQUIRE(t.f->config_write16(x + 8, 0x2830).has_value());
    CHECK(t.f->config_read16(x + 8).value() == 0x2830);
    CHECK((t.fn.state() == model::hca_state::disabled));
}

TEST_CASE("mlx5 model PCI: Initiate FLR resets the function as VFIO_USER_DEVICE_RESET does", "[model][mlx5]") {
    std::vector<model::ledger_entry> seen;
    auto o = fast();
    o.on_ledger = [&seen](const model::ledger_entry& e) { seen.push_back(e); };
    rig::test::served_model t(o);
    {
        // after the FLR the function knows none of it: teardown's first command times out, soon
        fw::hca_options ho;
        ho.timeouts.stop_events = 200ms;
        ho.timeouts.dealloc_uar = 200ms;
        ho.timeouts.teardown_hca = 200ms;
        ho.timeouts.reclaim_pages = 200ms;
        ho.timeouts.disable_hca = 200ms;
        auto h = fw::hca::bring_up(*t.f, ho);
        INFO((h ? std::string() : h.error().message));
        REQUIRE(h.has_value());
        CHECK(t.fn.state() == model::hca_state::initialized);
        CHECK(t.fn.pages_owned() == 4);
        const std::size_t objects = t.fn.objects();
        CHECK(objects >= 2);  // the EQ and its UAR at least
        REQUIRE(t.f->set_bus_master(true).has_value());
        const std::uint16_t devctl = t.f->config_read16(model::express_cap_offset + 8).value();
        REQUIRE(t.f->config_write16(model::express_cap_offset + 8, devctl | 0x8000).has_value());
        CHECK(t.fn.state() == model::hca_state::disabled);
        CHECK(t.fn.pages_owned() == 0);
        CHECK(t.fn.objects() == 0);
        CHECK((t.f->config_read16(0x04).value() & 0x4) == 0);  // bus master off
        CHECK(t.f->config_read16(model::express_cap_offset + 8).value() == devctl);  // FLR bit reads 0
        REQUIRE(seen.size() == 1);
        CHECK(model::to_string(seen[0]) ==
              "LEDGER function=0 event=reset pages=4 objects=" + std::to_string(objects));
    }
    // the driver's teardown after it found nothing (a silent firmware is noted, not reset)
    CHECK(seen.size() == 1);
}

// The kernel's __pci_read_base against BAR0: all ones written, the size read back; then an
// address, kept; BAR1 (the upper half) and BAR2..5 as a 64-bit BAR0 leaves them.
TEST_CASE("mlx5 model PCI: BAR0 sizing as hardware answers it, the bytes of config space kept from before",
          "[model][mlx5]") {
    auto o = fast();
    o.bar0_size = 1u << 20;
    rig::test::served_model t(o);
    CHECK(read32(*t.f, 0x10) == 0xc);  // 64-bit prefetchable memory
    CHECK(read32(*t.f, 0x14) == 0);
    for (std::uint32_t at = 0x10; at < 0x28; at += 4) {
        write32(*t.f, at, 0xffffffff);
    }
    CHECK(read32(*t.f, 0x10) == 0xfff0000cu);  // 1 MiB
    CHECK(read32(*t.f, 0x14) == 0xffffffffu);
    for (std::uint32_t at = 0x18; at < 0x28; at += 4) {
        CHECK(read32(*t.f, at) == 0);  // BAR2..5: none
    }
    write32(*t.f, 0x10, 0xe0012345);
    write32(*t.f, 0x14, 0x1);
    CHECK(read32(*t.f, 0x10) == 0xe000000cu);
    CHECK(read32(*t.f, 0x14) == 1);
    // the header as the model always had it: IDs, class, subsystem, the list, no ROM, no INTx pin
    CHECK(read32(*t.f, 0x00) == (std::uint32_t{model::connectx6dx_device_id} << 16 | 0x15b3));
    CHECK(read32(*t.f, 0x08) == 0x02000000u);
    CHECK(read32(*t.f, 0x2c) == 0x000015b3u);
    CHECK(read32(*t.f, 0x34) == 0x40);
    CHECK(t.f->config_read16(0x06).value() == 0x0010);
    CHECK(read32(*t.f, 0x3c) == 0);
    CHECK((t.f->config_read16(0x40).value()) == 0x6011);  // MSI-X, next Express at 0x60
    CHECK((t.f->config_read16(0x60).value()) == 0xc010);  // Express, next vendor-specific at 0xc0
    // a reset keeps the address, drops memory/bus master
    REQUIRE(t.f->config_write16(0x04, 0x0006).has_value());
    CHECK(t.f->config_read16(0x04).value() == 0x0006);
    REQUIRE(t.f->reset().has_value());
    CHECK(t.f->config_read16(0x04).value() == 0);
    CHECK(read32(*t.f, 0x10) == 0xe000000cu);
}

// The kernel's lib/pci_vsc.c against the gateway: lock, select a space, unlock.
TEST_CASE("mlx5 model PCI: the vendor-specific gateway's semaphore, counter and an unsupported space",
          "[model][mlx5]") {
    rig::test::served_model t(fast());
    const std::uint32_t v = model::vsc_cap_offset;
    CHECK((t.f->config_read16(v).value() >> 8) == 0);       // the last capability
    CHECK((read32(*t.f, v) >> 16 & 0xff) == 0x18);          // its length
    // mlx5_vsc_gw_lock: semaphore free, counter written, read back equal
    CHECK(read32(*t.f, v + 0x0c) == 0);
    const std::uint32_t c1 = read32(*t.f, v + 0x08);
    const std::uint32_t c2 = read32(*t.f, v + 0x08);
    CHECK(c1 != 0);
    CHECK(c2 != c1);  // a new value on every read
    write32(*t.f, v + 0x0c, c2);
    CHECK(read32(*t.f, v + 0x0c) == c2);  // taken
    write32(*t.f, v + 0x0c, c2 + 7);      // another owner's attempt is ignored
    CHECK(read32(*t.f, v + 0x0c) == c2);
    // mlx5_vsc_gw_set_space(MLX5_VSC_SPACE_SCAN_CRSPACE 7): status 31:29 reads 0, unsupported
    const std::uint32_t ctrl = read32(*t.f, v + 0x04);
    write32(*t.f, v + 0x04, (ctrl & ~0xffffu) | 0x7);
    const std::uint32_t back = read32(*t.f, v + 0x04);
    CHECK((back & 0xffff) == 0x7);
    CHECK((back >> 29) == 0);
    CHECK((back >> 28 & 1) == 0);  // no size
    // a read through the gateway completes (flag 1), failed: syndrome set, data 0, address moved on
    write32(*t.f, v + 0x10, 0x100);
    const std::uint32_t addr = read32(*t.f, v + 0x10);
    CHECK(addr >> 31 == 1);
    CHECK((addr >> 30 & 1) == 1);
    CHECK((addr & 0x3fffffff) == 0x104);
    CHECK(read32(*t.f, v + 0x14) == 0);
    // mlx5_vsc_gw_unlock: writes 0
    write32(*t.f, v + 0x0c, 0);
    CHECK(read32(*t.f, v + 0x0c) == 0);
    // a reset frees it too
    write32(*t.f, v + 0x0c, read32(*t.f, v + 0x08));
    CHECK(read32(*t.f, v + 0x0c) != 0);
    REQUIRE(t.f->reset().has_value());
    CHECK(read32(*t.f, v + 0x0c) == 0);
}

}  // namespace
