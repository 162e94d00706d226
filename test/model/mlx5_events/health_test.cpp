// firmware/mlx5 health_watcher, each check of the kernel's health.c (and rdma-core's
// mlx5_vfio_poll_health) on its own, against a fake
// function whose BAR0 is plain memory the test writes (the model's fatal/die hooks are covered
// in events_test.cpp; here the conditions the model has no hook for: DISABLED, SW_RESET, a
// stopped heartbeat, rfr or synd alone).
#include <array>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "abi/bits.hpp"
#include "abi/mlx5/ifc/init_seg.hpp"
#include "driver/function.hpp"
#include "firmware/mlx5/health.hpp"

namespace {

namespace ifc = rig::mlx5::ifc;
namespace abi = rig::abi;
namespace drv = rig::driver;
namespace fw = rig::firmware::mlx5;
using namespace std::chrono_literals;

// BAR0 as plain memory; every read of the heartbeat dword advances it, as the firmware does,
// unless `heartbeat` is off. `broken` makes every read fail, as a lost vfio-user connection.
class fake_bar0 final : public drv::function {
public:
    std::vector<std::byte> bar0 = std::vector<std::byte>(0x2000);
    bool heartbeat = true;
    bool broken = false;
    unsigned reads = 0;

    fake_bar0() { set_counter(0x10); }
    void set_counter(std::uint32_t v) { abi::store_be<std::uint32_t>(bar0.data() + 0x1010, v); }

    std::string_view name() const noexcept override { return "fake"; }
    drv::result<void> config_read(std::uint32_t, std::span<std::byte>) override { return {}; }
    drv::result<void> config_write(std::uint32_t, std::span<const std::byte>) override { return {}; }
    drv::result<drv::region_info> get_region_info(drv::region index) override {
        drv::region_info r;
        r.index = index;
        r.size = bar0.size();
        return r;
    }
    drv::result<void> region_read(drv::region, std::uint64_t offset, std::span<std::byte> out) override {
        ++reads;
        if (broken) {
            return std::unexpected(drv::error{"VFIO_USER_REGION_READ on fake: connection lost", 104});
        }
        if (offset == 0x1010 && heartbeat) {
            set_counter(abi::load_be<std::uint32_t>(bar0.data() + 0x1010) + 1);
        }
        std::memcpy(out.data(), bar0.data() + offset, out.size());
        return {};
    }
    drv::result<void> region_write(drv::region, std::uint64_t, std::span<const std::byte>) override { return {}; }
    drv::result<drv::bar_mapping> map_bar(drv::region, drv::caching) override {
        return std::unexpected(drv::error{"not here", 0});
    }
    drv::result<std::uint64_t> dma_map(const drv::dma_memory&, std::size_t, std::size_t, drv::dma_access) override {
        return std::unexpected(drv::error{"not here", 0});
    }
    drv::result<void> dma_unmap(std::uint64_t, std::size_t) override { return {}; }
    drv::result<drv::irq_info> get_irq_info(drv::irq_kind kind) override { return drv::irq_info{kind}; }
    drv::result<std::vector<int>> enable_irqs(drv::irq_kind, std::uint32_t) override {
        return std::unexpected(drv::error{"not here", 0});
    }
    drv::result<void> disable_irqs(drv::irq_kind) override { return {}; }
    drv::result<void> unmask_intx() override { return {}; }
    drv::result<void> reset() override { return {}; }
    void release() noexcept override {}
};

}  // namespace

TEST_CASE("mlx5 health: a healthy function passes every check", "[mlx5]") {
    fake_bar0 f;
    fw::health_watcher h(f, {.interval = 5ms, .max_misses = 3});
    for (int i = 0; i < 10; ++i) {
        CHECK_FALSE(h.check().has_value());
    }
    CHECK(f.reads == 30);  // health buffer, nic_interface dword, heartbeat: three reads a check
}

TEST_CASE("mlx5 health: each fatal condition of §1.4 is named", "[mlx5]") {
    fake_bar0 f;
    fw::health_watcher h(f);
    std::string expect;

    SECTION("fw_ver all ones: the function fell off the bus") {
        abi::store_be<std::uint32_t>(f.bar0.data() + 0x230, 0xffffffffu);
        expect = "health: the function is gone (health.fw_ver reads 0xffffffff)";
    }
    SECTION("nic_interface DISABLED") {
        abi::store_be<std::uint32_t>(f.bar0.data() + 0x14, 1u << 8);
        expect = "health: NIC interface DISABLED (0x1)";
    }
    SECTION("nic_interface SW_RESET") {
        abi::store_be<std::uint32_t>(f.bar0.data() + 0x14, 7u << 8);
        expect = "health: NIC interface SW_RESET (0x7)";
    }
    SECTION("rfr with a syndrome") {
        f.bar0[0x238] = std::byte{0x80};  // rfr (bit 7 of rfr_severity)
        f.bar0[0x23d] = std::byte{0x07};  // synd: irisc not responding
        abi::store_be<std::uint16_t>(f.bar0.data() + 0x23e, 0xbeef);
        expect = "health: irisc not responding (synd 0x7), ext_synd 0xbeef";
    }
    SECTION("a read that fails: the function is gone") {
        f.broken = true;
        expect = "health: the function does not answer (VFIO_USER_REGION_READ on fake: connection lost)";
    }
    auto e = h.check();
    REQUIRE(e.has_value());
    CHECK(e->kind == fw::error_kind::fatal);
    CHECK(e->message.rfind(expect, 0) == 0);
}

TEST_CASE("mlx5 health: rfr alone or a syndrome alone is not fatal", "[mlx5]") {
    fake_bar0 f;
    fw::health_watcher h(f);
    f.bar0[0x238] = std::byte{0x80};
    CHECK_FALSE(h.check().has_value());
    f.bar0[0x238] = std::byte{0};
    f.bar0[0x23d] = std::byte{0x01};
    CHECK_FALSE(h.check().has_value());
    // nic_interface INVALID (3) is not one of rdma-core's fatal states
    abi::store_be<std::uint32_t>(f.bar0.data() + 0x14, 3u << 8);
    CHECK_FALSE(h.check().has_value());
}

TEST_CASE("mlx5 health: a heartbeat unchanged for max_misses checks is fatal", "[mlx5]") {
    fake_bar0 f;
    fw::health_watcher h(f, {.interval = 1ms, .max_misses = 3});
    CHECK_FALSE(h.check().has_value());  // first look: nothing to compare with
    f.heartbeat = false;
    CHECK_FALSE(h.check().has_value());  // miss 1
    CHECK_FALSE(h.check().has_value());  // miss 2
    f.heartbeat = true;
    CHECK_FALSE(h.check().has_value());  // moving again: misses forgotten
    f.heartbeat = false;
    CHECK_FALSE(h.check().has_value());  // miss 1
    CHECK_FALSE(h.check().has_value());  // miss 2
    auto e = h.check();
    REQUIRE(e.has_value());
    CHECK(e->kind == fw::error_kind::fatal);
    CHECK(e->message.find("health: firmware heartbeat stopped") == 0);
    CHECK(e->message.find("unchanged for 3 checks") != std::string::npos);
}

TEST_CASE("mlx5 health: the next check is one interval after the last", "[mlx5]") {
    fake_bar0 f;
    fw::health_watcher h(f, {.interval = 250ms, .max_misses = 3});
    const auto before = fw::health_watcher::clock::now();
    static_cast<void>(h.check());
    CHECK(h.next_check() >= before + 250ms);
    CHECK(h.next_check() <= fw::health_watcher::clock::now() + 250ms);
}
