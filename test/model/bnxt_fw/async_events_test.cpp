// firmware/bnxt's async events (device.hpp step ASYNC_CR, events.hpp) and the model's interrupt
// arming (sim/bnxt interrupts.cpp, notices.cpp), against the bnxt model served over vfio-user:
// the NQ named async_event_cr and the events asked for at FUNC_DRV_RGTR; a link toggle reaching
// port_change and link_up; a reset notice (RESET_NOTIFY) failing the device with a named error
// within its deadline, commands refused at once, teardown local and stranding; the CREQ's MSI-X
// only when the driver armed the CREQ (polling mode never arms: no interrupt), an arm behind the
// producer raising at once, and event mode's arms keeping every command answered.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "abi/bits.hpp"
#include "abi/bnxt/doorbell.hpp"
#include "abi/bnxt/hwrm_cmds.hpp"
#include "abi/bnxt/rcfw.hpp"
#include "firmware/bnxt/device.hpp"
#include "firmware/bnxt/objects.hpp"
#include "served_bnxt.hpp"
#include "test/within.hpp"

using namespace std::chrono_literals;
namespace abi = rig::bnxt::abi;
namespace fw = rig::firmware::bnxt;
using clk = std::chrono::steady_clock;
using rig::test::bnxt_fw::served_bnxt;

namespace {

struct heard {
    std::mutex lock;
    std::vector<bool> links;
    std::vector<std::string> fatals;
    clk::time_point fatal_at{};

    fw::event_handlers handlers() {
        fw::event_handlers h;
        h.port_change = [this](bool up) {
            std::lock_guard g(lock);
            links.push_back(up);
        };
        h.fatal = [this](const fw::error& e) {
            std::lock_guard g(lock);
            fatals.push_back(e.message);
            fatal_at = clk::now();
        };
        return h;
    }
    template <class F>
    bool within(std::chrono::milliseconds bound, F&& done) {
        return rig::test::within(lock, bound, done);
    }
};

fw::device_options options(heard& h, bool events) {
    // an event, not the health look, must bring the news
    return rig::test::bnxt_fw::small_roce(h.handlers(), events, 1000ms);
}

constexpr std::uint16_t creq_vector = 0;   // device_options::creq_msix's default

bool registered_for(const rig::sim::bnxt::firmware& f, std::uint16_t id) {
    return (f.async_event_fwd()[id / 32] & (1u << (id % 32))) != 0;
}

}  // namespace

TEST_CASE("bnxt async events: step ASYNC_CR names the NQ; a link toggle reaches port_change; the NQ's RING_FREE "
          "releases it", "[model][bnxt_fw][async]") {
    served_bnxt m;
    heard h;
    auto d = fw::device::bring_up(*m.f, options(h, true));
    REQUIRE(d.has_value());
    fw::device& dev = **d;
    REQUIRE(dev.async_event_ring().has_value());
    CHECK(*dev.async_event_ring() == dev.nq_ring_id());
    m.fn.with_firmware([&](const rig::sim::bnxt::firmware& f) {
        CHECK(f.async_event_ring() == dev.nq_ring_id());
        CHECK(registered_for(f, abi::ASYNC_EVENT_CMPL_EVENT_ID_LINK_STATUS_CHANGE));
        CHECK(registered_for(f, abi::ASYNC_EVENT_CMPL_EVENT_ID_RESET_NOTIFY));
        CHECK_FALSE(registered_for(f, abi::ASYNC_EVENT_CMPL_EVENT_ID_ERROR_RECOVERY));
    });
    CHECK_FALSE(dev.event_thread()->link_up().has_value());
    const auto nq_vector = m.fn.interrupts(1);
    REQUIRE(m.fn.set_link(false));
    CHECK(h.within(500ms, [&] { return h.links == std::vector<bool>{false}; }));
    CHECK(dev.event_thread()->link_up() == false);
    REQUIRE(m.fn.set_link(true));
    CHECK(h.within(500ms, [&] { return h.links == std::vector<bool>{false, true}; }));
    CHECK(dev.event_thread()->link_up() == true);
    CHECK(dev.event_thread()->counts().async_events == 2);
    CHECK(m.fn.interrupts(1) >= nq_vector + 2);   // the NQ's vector, armed again after each
    REQUIRE(dev.teardown().has_value());
    CHECK(dev.stranded().empty());
    CHECK(h.fatals.empty());
    m.fn.with_firmware([](const rig::sim::bnxt::firmware& f) { CHECK_FALSE(f.async_event_ring().has_value()); });
    CHECK(m.fn.rings() == 0);
    CHECK(m.fn.context_pages() == 0);
    CHECK_FALSE(m.fn.set_link(false));   // nobody registered any more
}

TEST_CASE("bnxt async events: polling mode registers no async event ring (no thread to hear it)",
          "[model][bnxt_fw][async]") {
    served_bnxt m;
    heard h;
    auto d = fw::device::bring_up(*m.f, options(h, false));
    REQUIRE(d.has_value());
    CHECK_FALSE((*d)->async_event_ring().has_value());
    CHECK_FALSE(m.fn.set_link(false));
    REQUIRE((*d)->teardown().has_value());
}

TEST_CASE("bnxt async events: a reset notice fails the device with a named error within its deadline; nothing the "
          "firmware may touch is freed", "[model][bnxt_fw][async]") {
    rig::sim::bnxt::function_options mo;
    mo.reset_min_wait_ds = 3;   // the firmware is back after 300 ms
    served_bnxt m(mo);
    heard h;
    auto d = fw::device::bring_up(*m.f, options(h, true));
    REQUIRE(d.has_value());
    fw::device& dev = **d;
    const auto sent = clk::now();
    REQUIRE(m.fn.reset_notice(2));   // FW_EXCEPTION_FATAL
    // the notice is an NQ entry: the event thread hears it well before the 1 s health look
    REQUIRE(h.within(500ms, [&] { return h.fatals.size() == 1; }));
    CHECK(h.fatal_at - sent < 500ms);
    CHECK(h.fatals[0] ==
          "firmware reset notice (RESET_NOTIFY): reason FW_EXCEPTION_FATAL (0x2), driver action IFDOWN, firmware "
          "status 0x0, min wait 300 ms, max wait 6000 ms");
    CHECK(dev.event_thread()->failed());
    REQUIRE(dev.failure().has_value());
    CHECK(dev.failure()->kind == fw::error_kind::fatal);
    // nothing more is sent: a command is refused at once
    const auto start = clk::now();
    auto c = fw::cq::create(*dev.rcfw(), *m.f, dev.stranded_registry(), {.entries = 64, .nq_ring = dev.nq_ring_id()},
                            clk::now() + 5s);
    REQUIRE_FALSE(c.has_value());
    CHECK(c.error().kind == fw::error_kind::fatal);
    CHECK(clk::now() - start < 100ms);
    CHECK(m.fn.in_firmware_reset());
    // teardown sends nothing and strands the context memory, the rings' pages, the buffers
    static_cast<void>(dev.teardown());
    CHECK(clk::now() - start < 500ms);
    const auto stranded = dev.stranded();
    CHECK_FALSE(stranded.empty());
    // the firmware comes back by itself after its minimum wait, with nothing of the old driver's
    CHECK(h.within(2000ms, [&] { return !m.fn.in_firmware_reset(); }));
    CHECK(m.fn.rings() == 0);
    CHECK(m.fn.context_pages() == 0);
    std::this_thread::sleep_for(20ms);
    CHECK(h.fatals.size() == 1);
}

TEST_CASE("bnxt model: the CREQ raises its MSI-X vector only when armed", "[model][bnxt_fw][async][creq_arm]") {
    served_bnxt m;
    heard h;
    SECTION("polling mode acknowledges with NQ (no arm): no interrupt for any command or event") {
        auto d = fw::device::bring_up(*m.f, options(h, false));
        REQUIRE(d.has_value());
        fw::device& dev = **d;
        for (int i = 0; i < 50; ++i) {
            REQUIRE(dev.rcfw()->send<abi::creq_query_version_resp>(abi::cmdq_query_version{}, 0, clk::now() + 5s).has_value());
        }
        CHECK(m.fn.interrupts(creq_vector) == 0);
        // an entry the driver has not seen, then an arm behind it: the interrupt at once
        auto c = fw::cq::create(*dev.rcfw(), *m.f, dev.stranded_registry(), {.entries = 64, .nq_ring = dev.nq_ring_id()},
                                clk::now() + 5s);
        REQUIRE(c.has_value());
        auto q = fw::qp::create(*dev.rcfw(), *m.f, dev.stranded_registry(),
                                {.pd = 1, .send_cq = c->id(), .receive_cq = c->id()}, clk::now() + 5s);
        REQUIRE(q.has_value());
        REQUIRE(m.fn.qp_error(q->id(), 2, 0, 0, 0));
        std::this_thread::sleep_for(20ms);
        CHECK(m.fn.interrupts(creq_vector) == 0);
        const std::uint32_t consumer = m.fn.with_firmware(
            [](const rig::sim::bnxt::firmware& f) { return f.rcfw().creq_producer - 1; });   // the error unseen
        std::array<std::byte, 8> arm{};
        rig::abi::store_le<std::uint64_t>(
            arm.data(), abi::doorbell(abi::DBC_DBC_TYPE_NQ_ARM, dev.creq_ring_id(), consumer % dev.creq_entries(),
                                      ((consumer / dev.creq_entries()) & 1) != 0));
        REQUIRE(m.f->region_write(rig::driver::region::bar2, dev.doorbell_offset(), arm).has_value());
        CHECK(h.within(500ms, [&] { return m.fn.interrupts(creq_vector) == 1; }));
        REQUIRE(q->destroy(*dev.rcfw(), *m.f, dev.stranded_registry(), clk::now() + 5s).has_value());
        REQUIRE(c->destroy(*dev.rcfw(), *m.f, dev.stranded_registry(), clk::now() + 5s).has_value());
        REQUIRE(dev.teardown().has_value());
    }
    SECTION("event mode re-arms after each service: every command answered, one interrupt per arm") {
        auto d = fw::device::bring_up(*m.f, options(h, true));
        REQUIRE(d.has_value());
        fw::device& dev = **d;
        const auto before = m.fn.interrupts(creq_vector);
        const auto start = clk::now();
        for (int i = 0; i < 200; ++i) {
            REQUIRE(dev.rcfw()->send<abi::creq_query_version_resp>(abi::cmdq_query_version{}, 0, clk::now() + 5s).has_value());
        }
        CHECK(clk::now() - start < 5s);   // no command waited out a lost interrupt
        const auto raised = m.fn.interrupts(creq_vector) - before;
        CHECK(raised >= 1);
        CHECK(raised <= 200);   // at most one per arm, and the driver arms once per service
        REQUIRE(dev.teardown().has_value());
        CHECK(dev.stranded().empty());
    }
}
