// firmware/bnxt's RoCE NQ and event thread (events.hpp) against the bnxt model served over
// vfio-user: the NQ ring (step NQ, RING_FREE at teardown), CQ notifications written on the NQ
// reaching the completion handler with their cq_handle across a wrap of the NQ (the phase) and
// the NQ_ARM doorbell at word 1 of the privileged page; a CREQ QP_ERROR_NOTIFICATION reaching
// qp_error in event mode and in polling mode; a dead function reaching fatal once, the channels
// stopped and the teardown local with what the firmware may name stranded.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "abi/bits.hpp"
#include "abi/bnxt/cqe.hpp"
#include "abi/bnxt/doorbell.hpp"
#include "abi/bnxt/rcfw.hpp"
#include "firmware/bnxt/device.hpp"
#include "firmware/bnxt/objects.hpp"
#include "sim/vfio_user/device.hpp"
#include "served_bnxt.hpp"
#include "test/within.hpp"

using namespace std::chrono_literals;
namespace abi = rig::bnxt::abi;
namespace fw = rig::firmware::bnxt;
namespace drv = rig::driver;
using clk = std::chrono::steady_clock;
using rig::test::bnxt_fw::served_bnxt;

namespace {

// What the handlers saw, from the event thread.
struct seen {
    std::mutex lock;
    std::vector<std::uint64_t> handles;
    std::vector<std::array<std::uint32_t, 3>> qp_errors;
    std::atomic<int> fatals{0};
    std::string fatal_message;

    fw::event_handlers handlers() {
        return {.completion = [this](std::uint64_t h) { std::lock_guard g(lock); handles.push_back(h); },
                .qp_error = [this](std::uint32_t qpn, std::uint8_t req, std::uint8_t res) {
                    std::lock_guard g(lock);
                    qp_errors.push_back({qpn, req, res});
                },
                .fatal = [this](const fw::error& e) {
                    std::lock_guard g(lock);
                    fatal_message = e.message;
                    ++fatals;
                },
                .port_change = {}};   // link events: async_events_test
    }
    template <class F>
    bool within(std::chrono::milliseconds bound, F&& done) {
        return rig::test::within(lock, bound, done);
    }
};

fw::device_options roce(seen& s, bool events) {
    return rig::test::bnxt_fw::small_roce(s.handlers(), events, 20ms);
}

// The device writing NQ entry `k` (host view of the ring): the cq_handle first, the v bit last.
void write_nq_cn(const fw::device& d, std::uint64_t k, std::uint64_t handle) {
    std::byte* e = d.nq_memory() + (k % d.nq_entries()) * 16;
    abi::nq_cn n{};
    n.type = abi::NQ_CN_TYPE_CQ_NOTIFICATION;
    n.cq_handle_low = static_cast<std::uint32_t>(handle);
    n.cq_handle_high = static_cast<std::uint32_t>(handle >> 32);
    n.v = (k / d.nq_entries()) % 2 == 0 ? 1 : 0;
    const auto bytes = abi::to_bytes(n);
    std::memcpy(e, bytes.data(), 8);
    std::memcpy(e + 12, bytes.data() + 12, 4);
    std::atomic_ref<std::byte>(e[8]).store(bytes[8], std::memory_order_release);
}

// The NQ's last arm as the model took it (the privileged page is trapped: every store is taken
// by the model as it comes, sim/bnxt notices.cpp).
std::uint64_t nq_arm_word(served_bnxt& m, const fw::device& d) {
    return m.fn.with_firmware([&](const rig::sim::bnxt::firmware& f) {
        const auto r = f.rings().find(d.nq_ring_id());
        return r == f.rings().end() ? 0 : r->second.last_doorbell;
    });
}

}  // namespace

TEST_CASE("bnxt events: step NQ allocates a RoCE NQ on MSI-X vector 1 by a PBL; teardown frees it", "[model][bnxt_fw][events]") {
    served_bnxt m;
    seen s;
    auto o = roce(s, false);
    o.nq_entries = 4096;   // 16 pages: a one-level PBL (256 entries would be one page, level 0)
    auto d = fw::device::bring_up(*m.f, o);
    REQUIRE(d.has_value());
    fw::device& dev = **d;
    CHECK(dev.nq_ring_id() != 0xffff);
    CHECK(dev.nq_ring_id() != dev.creq_ring_id());
    CHECK(dev.nq_entries() == 4096);
    CHECK(dev.event_thread() == nullptr);   // polling mode: no thread
    m.fn.with_firmware([&](const rig::sim::bnxt::firmware& f) {
        REQUIRE(f.rings().count(dev.nq_ring_id()) == 1);
        const auto& nq = f.rings().at(dev.nq_ring_id());
        CHECK(nq.type == abi::RING_ALLOC_REQ_RING_TYPE_NQ);
        CHECK(nq.int_mode == abi::RING_ALLOC_REQ_INT_MODE_MSIX);
        CHECK(nq.logical_id == 1);
        CHECK(nq.length == 4096);
        CHECK(nq.depth == 1);   // 64 KiB of entries behind a one-level PBL
        CHECK(nq.pages.size() == 16);
        CHECK(f.rings().at(dev.creq_ring_id()).logical_id == 0);
    });
    // CREATE_CQ names the NQ: the model takes it as the CQ's NQ
    auto c = fw::cq::create(*dev.rcfw(), *m.f, dev.stranded_registry(),
                            {.entries = 64, .nq_ring = dev.nq_ring_id(), .handle = 0x1234}, clk::now() + 5s);
    REQUIRE(c.has_value());
    CHECK(c->handle() == 0x1234);
    REQUIRE(c->destroy(*dev.rcfw(), *m.f, dev.stranded_registry(), clk::now() + 5s).has_value());
    REQUIRE(dev.teardown().has_value());
    CHECK(dev.stranded().empty());
    CHECK(m.fn.rings() == 0);
}

TEST_CASE("bnxt events: CQ notifications on the NQ reach the handler by cq_handle, through a wrap; NQ_ARM at +8", "[model][bnxt_fw][events]") {
    served_bnxt m;
    seen s;
    auto o = roce(s, true);
    o.health_interval = 1000ms;   // the interrupt, not the health look, must bring the thread round
    auto d = fw::device::bring_up(*m.f, o);
    REQUIRE(d.has_value());
    fw::device& dev = **d;
    REQUIRE(dev.event_thread() != nullptr);
    // The first arm (consumer 0, epoch 0) went out when the thread started.
    CHECK(nq_arm_word(m, dev) == abi::doorbell(abi::DBC_DBC_TYPE_NQ_ARM, dev.nq_ring_id(), 0, false));

    write_nq_cn(dev, 0, 0xabcdef0012345678);
    REQUIRE(m.srv->trigger(rig::sim::vfio_user::irq::msix, 1));
    CHECK(s.within(500ms, [&] { return s.handles.size() == 1; }));
    CHECK(s.handles.at(0) == 0xabcdef0012345678);
    CHECK(s.within(500ms, [&] { return dev.event_thread()->counts().arms == 2; }));
    CHECK(nq_arm_word(m, dev) == abi::doorbell(abi::DBC_DBC_TYPE_NQ_ARM, dev.nq_ring_id(), 1, false));

    // The rest of the first pass, then two entries of the second (v = 0 there): 258 in all.
    for (std::uint64_t k = 1; k < 256; ++k) {
        write_nq_cn(dev, k, 0x1000 + k);
    }
    REQUIRE(m.srv->trigger(rig::sim::vfio_user::irq::msix, 1));
    REQUIRE(s.within(500ms, [&] { return s.handles.size() == 256; }));
    CHECK(s.within(500ms, [&] {
        return nq_arm_word(m, dev) == abi::doorbell(abi::DBC_DBC_TYPE_NQ_ARM, dev.nq_ring_id(), 0, true);
    }));
    write_nq_cn(dev, 256, 0x1000 + 256);
    write_nq_cn(dev, 257, 0x1000 + 257);
    REQUIRE(m.srv->trigger(rig::sim::vfio_user::irq::msix, 1));
    CHECK(s.within(500ms, [&] { return s.handles.size() == 258; }));
    CHECK(s.handles.back() == 0x1000 + 257);
    CHECK(s.within(500ms, [&] {
        return nq_arm_word(m, dev) == abi::doorbell(abi::DBC_DBC_TYPE_NQ_ARM, dev.nq_ring_id(), 2, true);
    }));
    // A stale entry of the first pass (v = 1) in the second pass is not taken.
    std::this_thread::sleep_for(30ms);
    CHECK(s.handles.size() == 258);
    CHECK(dev.event_thread()->counts().notifications == 258);
    CHECK(dev.event_thread()->counts().interrupts >= 2);
    REQUIRE(dev.teardown().has_value());
    CHECK(s.fatals == 0);
    CHECK(m.fn.rings() == 0);
}

TEST_CASE("bnxt events: a CREQ QP_ERROR_NOTIFICATION reaches qp_error with the QP and both reasons", "[model][bnxt_fw][events]") {
    const bool events = GENERATE(true, false);
    INFO((events ? "event mode" : "polling mode"));
    served_bnxt m;
    seen s;
    auto d = fw::device::bring_up(*m.f, roce(s, events));
    REQUIRE(d.has_value());
    fw::device& dev = **d;
    auto& ch = *dev.rcfw();
    const auto by = [] { return clk::now() + 5s; };
    auto c = fw::cq::create(ch, *m.f, dev.stranded_registry(), {.entries = 64, .nq_ring = dev.nq_ring_id()}, by());
    REQUIRE(c.has_value());
    auto q = fw::qp::create(ch, *m.f, dev.stranded_registry(), {.pd = 1, .send_cq = c->id(), .receive_cq = c->id()}, by());
    REQUIRE(q.has_value());
    REQUIRE(m.fn.qp_error(q->id(), abi::CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_TIMEOUT_RETRY_LIMIT,
                          abi::CREQ_QP_ERROR_NOTIFICATION_RES_ERR_STATE_REASON_RES_RX_INVALID_R_KEY, 0, 0));
    if (!events) {
        // Polling mode: the next command's wait polls the CREQ and finds it.
        REQUIRE(q->query(ch, by()).has_value());
    }
    CHECK(s.within(1000ms, [&] { return s.qp_errors.size() == 1; }));
    CHECK(s.qp_errors.at(0) == std::array<std::uint32_t, 3>{q->id(), 2, 6});
    auto state = q->query(ch, by());
    REQUIRE(state.has_value());
    CHECK(state->state == abi::CMDQ_MODIFY_QP_NEW_STATE_ERR);
    REQUIRE(q->destroy(ch, *m.f, dev.stranded_registry(), by()).has_value());
    REQUIRE(c->destroy(ch, *m.f, dev.stranded_registry(), by()).has_value());
    REQUIRE(dev.teardown().has_value());
    CHECK(s.fatals == 0);
}

TEST_CASE("bnxt events: a dead function reaches fatal once; commands are refused at once; teardown strands", "[model][bnxt_fw][events]") {
    served_bnxt m;
    seen s;
    auto d = fw::device::bring_up(*m.f, roce(s, true));
    REQUIRE(d.has_value());
    fw::device& dev = **d;
    m.fn.die();
    CHECK(s.within(2000ms, [&] { return s.fatals == 1; }));
    CHECK(s.fatal_message == "the function reads all ones (vendor ID 0xffff): it is gone");
    CHECK(dev.event_thread()->failed());
    const auto start = clk::now();
    auto c = fw::cq::create(*dev.rcfw(), *m.f, dev.stranded_registry(), {.entries = 64, .nq_ring = dev.nq_ring_id()},
                            clk::now() + 5s);
    REQUIRE_FALSE(c.has_value());
    CHECK(c.error().kind == fw::error_kind::fatal);
    CHECK(clk::now() - start < 100ms);
    REQUIRE(dev.failure().has_value());
    auto t = dev.teardown();
    CHECK(clk::now() - start < 500ms);   // nothing sent: completed locally
    CHECK_FALSE(dev.stranded().empty());
    std::this_thread::sleep_for(50ms);
    CHECK(s.fatals == 1);
}
