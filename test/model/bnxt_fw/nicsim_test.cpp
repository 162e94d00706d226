// firmware/bnxt and Rig's bnxt NIC against a rig-nicsim process the test starts (tools/rig-nicsim
// --family bnxt, test/model/nicsim_faults/nicsim_process.hpp): issue 14's 100 bring-up and
// teardown cycles with nothing leaked on either side (the model's ledger after each teardown, the
// driver's stranded report); a link toggle (SIGUSR1, --link-down-after-ms) reaching the NIC's
// port_change through the firmware's LINK_STATUS_CHANGE; the firmware's reset notice
// (--fault-fatal REASON) failing the device with a named error within its deadline.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "driver/function.hpp"
#include "firmware/bnxt/device.hpp"
#include "rig/nic.hpp"
#include "test/model/nicsim_faults/nicsim_process.hpp"
#include "test/within.hpp"

using namespace std::chrono_literals;
namespace fw = rig::firmware::bnxt;
using clk = std::chrono::steady_clock;
using rig::test::nicsim_process;

namespace {

fw::device_options options() {
    fw::device_options o;
    o.creq_entries = 1024;
    o.nq_entries = 256;
    o.rcfw.cmdq_slots = 256;
    o.rcfw_events = true;   // as rig::nic brings it up: the event thread, the async event ring
    o.health_interval = 1000ms;
    return o;
}

// The ledger line rig-nicsim printed for `event` at or after byte `from` of its output.
std::string ledger_line(const nicsim_process& sim, const std::string& event, std::size_t from, std::size_t* at) {
    const std::string key = "LEDGER function=0 event=" + event + " ";
    if (!sim.wait_for(key, 5000ms, from)) {
        return {};
    }
    const std::string out = sim.output();
    const std::size_t p = out.find(key, from);
    const std::size_t end = out.find('\n', p);
    if (at != nullptr) {
        *at = end;
    }
    return out.substr(p, end - p);
}

using rig::test::within;

}  // namespace

TEST_CASE("bnxt against rig-nicsim: 100 bring-up and teardown cycles, the model's ledger empty and nothing stranded",
          "[model][bnxt_fw][nicsim]") {
    nicsim_process sim({"--report-ledger"}, 1);
    auto f = rig::driver::open(sim.where(0));
    REQUIRE(f.has_value());
    for (int i = 0; i < 100; ++i) {
        INFO("cycle " << i);
        const std::size_t from = sim.output().size();
        auto d = fw::device::bring_up(**f, options());
        if (!d) {
            FAIL(d.error().message);
        }
        CHECK((*d)->async_event_ring().has_value());
        REQUIRE((*d)->teardown().has_value());
        CHECK((*d)->stranded().empty());
        d->reset();
        // FUNC_DRV_UNRGTR left no ring, statistics context, VNIC, filter or RoCE object; Rig's
        // last FUNC_RESET took the context memory back
        std::size_t at = 0;
        const std::string unrgtr = ledger_line(sim, "drv_unrgtr", from, &at);
        INFO(sim.output().substr(from));
        CHECK(unrgtr == "LEDGER function=0 event=drv_unrgtr rings=0 stat_ctxs=0 vnics=0 filters=0 roce_objects=0 "
                        "context_pages=" + unrgtr.substr(unrgtr.rfind('=') + 1));
        CHECK(ledger_line(sim, "func_reset", at, nullptr) ==
              "LEDGER function=0 event=func_reset rings=0 stat_ctxs=0 vnics=0 filters=0 roce_objects=0 context_pages=0");
    }
    f->reset();
    CHECK(sim.stop() == 0);
}

TEST_CASE("bnxt against rig-nicsim: a link toggle (SIGUSR1, --link-down-after-ms) reaches the NIC's port_change",
          "[model][bnxt_fw][nicsim]") {
    const bool timed = GENERATE(false, true);
    INFO((timed ? "--link-down-after-ms 1500 --link-up-after-ms 2000" : "SIGUSR1 twice"));
    std::vector<std::string> extra;
    if (timed) {
        extra = {"--link-down-after-ms", "1500", "--link-up-after-ms", "2000"};
    }
    nicsim_process sim(extra, 1);
    std::mutex lock;
    std::vector<bool> links;
    rig::nic_options o;
    o.port_change = [&](bool up) {
        std::lock_guard g(lock);
        links.push_back(up);
    };
    auto n = rig::nic::open(sim.where(0), o);
    if (!n) {
        FAIL(n.error().message);
    }
    const auto seen = [&](std::vector<bool> want) {
        return within(5000ms, [&] {
            std::lock_guard g(lock);
            return links == want;
        });
    };
    if (!timed) {
        sim.signal(SIGUSR1);
        CHECK(seen({false}));
        sim.signal(SIGUSR1);
        CHECK(seen({false, true}));
    } else {
        CHECK(seen({false, true}));
    }
    REQUIRE((*n)->close().has_value());
    CHECK((*n)->stranded().empty());
    CHECK(sim.stop() == 0);
}

TEST_CASE("bnxt against rig-nicsim: the firmware's reset notice (--fault-fatal 2) fails the device with a named "
          "error within its deadline", "[model][bnxt_fw][nicsim]") {
    // How many HWRM requests bring-up sends: the notice strikes after the one that follows it.
    std::size_t hwrm = 0;
    std::size_t counted = 0;
    {
        nicsim_process plain({"--init-time-ms", "0"}, 1);   // no DEV_NOT_RDY: VER_GET once
        auto f = rig::driver::open(plain.where(0));
        REQUIRE(f.has_value());
        auto o = options();
        o.trace = [&](const fw::command_record& r) { counted += r.channel == "hwrm" ? 1 : 0; };
        auto d = fw::device::bring_up(**f, o);
        REQUIRE(d.has_value());
        hwrm = counted;   // the teardown's are traced too
        REQUIRE((*d)->teardown().has_value());
    }
    REQUIRE(hwrm > 10);
    nicsim_process sim({"--init-time-ms", "0", "--fault-fatal", "2", "--fault-after", std::to_string(hwrm + 1)}, 1);
    auto f = rig::driver::open(sim.where(0));
    REQUIRE(f.has_value());
    std::mutex lock;
    std::vector<std::string> fatals;
    auto o = options();
    o.events.fatal = [&](const fw::error& e) {
        std::lock_guard g(lock);
        fatals.push_back(e.message);
    };
    auto d = fw::device::bring_up(**f, o);
    if (!d) {
        FAIL(d.error().message);
    }
    fw::device& dev = **d;
    REQUIRE(dev.hwrm().ver_get(clk::now() + 5s).has_value());   // the request after which it strikes
    const auto asked = clk::now();
    INFO(sim.output());
    // heard from the NQ, not from the 1 s health look
    CHECK(within(500ms, [&] {
        std::lock_guard g(lock);
        return fatals.size() == 1;
    }));
    CHECK(clk::now() - asked < 500ms);
    REQUIRE(fatals.size() == 1);
    CHECK(fatals[0].starts_with(
        "firmware reset notice (RESET_NOTIFY): reason FW_EXCEPTION_FATAL (0x2), driver action IFDOWN"));
    CHECK(sim.wait_for("firmware reset notice (reason 2)", 1000ms));
    REQUIRE(dev.failure().has_value());
    CHECK(dev.failure()->kind == fw::error_kind::fatal);
    const auto start = clk::now();
    static_cast<void>(dev.teardown());
    CHECK(clk::now() - start < 500ms);   // nothing sent
    CHECK_FALSE(dev.stranded().empty());  // context memory, rings, buffers: the firmware's still
    d->reset();
    f->reset();
    CHECK(sim.stop() == 0);
}
