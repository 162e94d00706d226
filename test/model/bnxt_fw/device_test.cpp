// firmware/bnxt's bring-up and teardown against the bnxt model's firmware (in process, see
// firmware_function.hpp): the HWRM sequence of bnxt_en's bnxt_fw_init_one_p1/p2 in the
// trace, the model's
// state after each, many cycles with nothing left on either side, refusals named by their step,
// DEV_NOT_RDY, and silence at bring-up and at teardown with what the firmware may name stranded.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "abi/bnxt/hwrm.hpp"
#include "firmware/bnxt/device.hpp"
#include "test/model/bnxt_fw/firmware_function.hpp"

using namespace std::chrono_literals;
namespace abi = rig::bnxt::abi;
namespace fw = rig::firmware::bnxt;
using rig::test::bnxt::firmware_function;
using clk = std::chrono::steady_clock;

namespace {

const std::vector<std::string> bring_up_sequence = {
    "VER_GET",          "FUNC_RESET",          "FUNC_QCAPS",   "FUNC_DRV_RGTR",  "FUNC_BACKING_STORE_QCAPS",
    "FUNC_BACKING_STORE_CFG", "FUNC_RESOURCE_QCAPS", "FUNC_QCFG", "FUNC_CFG",   "STAT_CTX_ALLOC",
    "VNIC_ALLOC",       "VNIC_CFG",            "CFA_L2_FILTER_ALLOC", "RING_ALLOC",
};
const std::vector<std::string> teardown_sequence = {
    "RING_FREE", "CFA_L2_FILTER_FREE", "VNIC_FREE", "STAT_CTX_FREE", "FUNC_DRV_UNRGTR", "FUNC_RESET",
};

struct traced {
    std::vector<fw::command_record> records;
    fw::device_options options() {
        fw::device_options o;
        o.creq_entries = 4096;
        o.roce_channel = false;   // the HWRM (L2) sequence; the RoCE steps: rcfw_test.cpp
        o.trace = [this](const fw::command_record& r) { records.push_back(r); };
        return o;
    }
    std::vector<std::string> names() const {
        std::vector<std::string> n;
        for (const auto& r : records) {
            n.emplace_back(r.name);
        }
        return n;
    }
};

std::size_t mapped_bytes(const firmware_function& f) {
    std::size_t n = 0;
    for (const auto& [iova, bytes] : f.maps) {
        n += bytes;
    }
    return n;
}

}  // namespace

TEST_CASE("bnxt device: bring-up in bnxt_en's order, the model's state, teardown leaves nothing", "[model][bnxt_fw]") {
    firmware_function f;
    traced t;
    auto d = fw::device::bring_up(f, t.options());
    REQUIRE(d.has_value());
    CHECK(t.names() == bring_up_sequence);
    for (const auto& r : t.records) {
        INFO(r.name);
        CHECK(r.status == 0);
        CHECK(r.short_command == (r.in.size() > 128));  // longer than the window
    }
    for (const auto& r : t.records) {
        if (r.name == "FUNC_BACKING_STORE_CFG" || r.name == "FUNC_CFG") {
            CHECK(r.short_command);  // 336 and 160 bytes
            CHECK(r.in.size() == (r.name == "FUNC_CFG" ? 160u : 336u));
        }
    }
    auto& dev = **d;
    CHECK(dev.reached() == fw::bring_up_step::ready);
    CHECK(dev.chip_num() == 0x1750);
    CHECK(dev.versions().text(dev.versions().hwrm_interface) == "1.10.3");
    CHECK(dev.mac() == f.fw.options().mac);
    CHECK(dev.doorbell_offset() == 0x10000);
    CHECK(dev.doorbell_size() == 128 * 1024);
    CHECK(dev.resource_manager());
    // the model: RoCE-sized context memory with nothing wrong in it, RoCE receive plumbed, the
    // CREQ an NQ ring of 4096 entries by a one-level PBL on MSI-X 0
    CHECK(f.fw.registered());
    CHECK(f.fw.roce_backing_store());
    CHECK(f.fw.roce_receive_ready());
    CHECK(f.fw.context_violations().empty());
    CHECK(f.fw.context_pages() > 0);
    REQUIRE(f.fw.rings().size() == 1);
    const auto& creq = f.fw.rings().begin()->second;
    CHECK(f.fw.rings().begin()->first == dev.creq_ring_id());
    CHECK(creq.type == abi::RING_ALLOC_REQ_RING_TYPE_NQ);
    CHECK(creq.length == 4096);
    CHECK(creq.depth == 1);
    CHECK(creq.int_mode == abi::RING_ALLOC_REQ_INT_MODE_MSIX);
    CHECK(creq.pages.size() == 16);
    CHECK(creq.pages.front() == dev.creq_iova());
    CHECK(f.fw.stat_ctxs().count(dev.stat_ctx_id()) == 1);
    CHECK(f.fw.vnics().count(dev.vnic_id()) == 1);
    CHECK(f.fw.l2_filters().size() == 1);
    CHECK(dev.stranded().empty());

    t.records.clear();
    REQUIRE(dev.teardown().has_value());
    CHECK(t.names() == teardown_sequence);
    for (const auto& r : t.records) {
        INFO(r.name);
        CHECK(r.status == 0);
    }
    CHECK_FALSE(f.fw.registered());
    CHECK(f.fw.rings().empty());
    CHECK(f.fw.stat_ctxs().empty());
    CHECK(f.fw.vnics().empty());
    CHECK(f.fw.l2_filters().empty());
    CHECK(f.fw.context_pages() == 0);
    CHECK(f.fw.context_violations().empty());
    CHECK(dev.stranded().empty());
    CHECK(dev.teardown().has_value());  // idempotent
    d->reset();
    CHECK(f.maps.empty());  // every buffer unmapped: HWRM, context memory, stats, CREQ
}

TEST_CASE("bnxt device: 25 bring-up and teardown cycles, nothing left on either side", "[model][bnxt_fw]") {
    firmware_function f;
    for (int i = 0; i < 25; ++i) {
        INFO("cycle " << i);
        fw::device_options o;
        o.creq_entries = 256;
        o.roce_channel = false;   // the HWRM (L2) sequence; the RoCE steps: rcfw_test.cpp
        auto d = fw::device::bring_up(f, o);
        REQUIRE(d.has_value());
        REQUIRE((*d)->teardown().has_value());
        CHECK((*d)->stranded().empty());
        d->reset();
        REQUIRE(f.maps.empty());
        REQUIRE(f.fw.context_pages() == 0);
        REQUIRE(f.fw.rings().empty());
        REQUIRE(f.fw.context_violations().empty());
    }
    CHECK(f.fw.commands_executed() == 25u * 20u);
}

TEST_CASE("bnxt device: a function without RoCE v2 is refused at FUNC_QCAPS, all undone", "[model][bnxt_fw]") {
    rig::sim::bnxt::firmware_options o;
    o.roce = false;
    firmware_function f(o);
    traced t;
    auto d = fw::device::bring_up(f, t.options());
    REQUIRE_FALSE(d.has_value());
    CHECK(d.error().kind == fw::error_kind::bad_output);
    CHECK(d.error().message.starts_with("bring-up step FUNC_QCAPS: the function does not support RoCE v2 (FUNC_QCAPS flags "));
    CHECK(t.names() == std::vector<std::string>{"VER_GET", "FUNC_RESET", "FUNC_QCAPS"});
    CHECK(f.maps.empty());
}

TEST_CASE("bnxt device: a firmware refusal is named by its step, request, error code and cmd_err", "[model][bnxt_fw]") {
    rig::sim::bnxt::firmware_options o;
    o.max_vnics = 0;
    firmware_function f(o);
    traced t;
    auto d = fw::device::bring_up(f, t.options());
    REQUIRE_FALSE(d.has_value());
    CHECK(d.error().kind == fw::error_kind::status);
    INFO(d.error().message);
    CHECK(d.error().error_code == abi::HWRM_ERR_CODE_RESOURCE_ALLOC_ERROR);
    CHECK(d.error().message.starts_with("bring-up step "));
    CHECK(d.error().message.find(": RESOURCE_ALLOC_ERROR (0x4), cmd_err 0x8") != std::string::npos);
    // undone: registered objects freed, the driver unregistered, context memory released
    CHECK(t.names().back() == "FUNC_RESET");
    CHECK_FALSE(f.fw.registered());
    CHECK(f.fw.context_pages() == 0);
    CHECK(f.fw.context_violations().empty());
    CHECK(f.maps.empty());
}

TEST_CASE("bnxt device: VER_GET is asked again while the firmware says DEV_NOT_RDY", "[model][bnxt_fw]") {
    SECTION("ready within the deadline") {
        rig::sim::bnxt::firmware_options o;
        o.not_ready_time = 200ms;
        firmware_function f(o);
        traced t;
        auto d = fw::device::bring_up(f, t.options());
        REQUIRE(d.has_value());
        const auto n = t.names();
        const auto first_reset = std::find(n.begin(), n.end(), "FUNC_RESET") - n.begin();
        CHECK(first_reset >= 2);
        for (std::ptrdiff_t i = 0; i < first_reset; ++i) {
            CHECK(n[i] == "VER_GET");
        }
    }
    SECTION("not ready by the deadline") {
        rig::sim::bnxt::firmware_options o;
        o.not_ready_time = 5s;
        firmware_function f(o);
        fw::device_options d;
        d.timeouts.ready = 150ms;
        d.roce_channel = false;
        const auto start = clk::now();
        auto r = fw::device::bring_up(f, d);
        REQUIRE_FALSE(r.has_value());
        CHECK(clk::now() - start < 1s);
        CHECK(r.error().kind == fw::error_kind::timeout);
        CHECK(r.error().message ==
              "bring-up step VER_GET: VER_GET (0x0): the firmware still reports DEV_NOT_RDY after 150 ms");
        CHECK(f.maps.empty());
    }
}

TEST_CASE("bnxt device: silence at FUNC_BACKING_STORE_CFG ends bring-up in time, context memory stranded", "[model][bnxt_fw]") {
    firmware_function f;
    f.answer_limit = 5;  // VER_GET .. FUNC_BACKING_STORE_QCAPS answered, CFG never
    traced t;
    const auto start = clk::now();
    auto d = fw::device::bring_up(f, t.options());
    const auto took = clk::now() - start;
    REQUIRE_FALSE(d.has_value());
    CHECK(d.error().kind == fw::error_kind::timeout);
    CHECK(d.error().message ==
          "bring-up step BACKING_STORE: FUNC_BACKING_STORE_CFG (0x193): no response " + rig::test::bnxt::within_model_timeout());
    CHECK(took < 3 * rig::test::bnxt::model_timeout());
    CHECK(f.triggers() == 6);  // teardown sent nothing to a silent firmware
    // The HWRM buffers and every context page stay mapped: the firmware may own them.
    CHECK(f.maps.size() > 2);
    CHECK(mapped_bytes(f) > 4u * 1024 * 1024);
}

TEST_CASE("bnxt device: silence at teardown completes locally and lists what is stranded", "[model][bnxt_fw]") {
    firmware_function f;
    f.answer_limit = bring_up_sequence.size();  // bring-up answered, teardown's first request not
    traced t;
    auto d = fw::device::bring_up(f, t.options());
    REQUIRE(d.has_value());
    const auto ctx_bytes = (*d)->contexts()->bytes();
    const auto start = clk::now();
    auto r = (*d)->teardown();
    REQUIRE_FALSE(r.has_value());
    CHECK(clk::now() - start < 3 * rig::test::bnxt::model_timeout());
    CHECK(r.error().message == "teardown step RING_FREE: RING_FREE (0x51): no response " + rig::test::bnxt::within_model_timeout());
    CHECK(f.triggers() == bring_up_sequence.size() + 1);
    const auto st = (*d)->stranded();
    std::vector<std::string> what;
    std::size_t bytes = 0;
    for (const auto& s : st) {
        what.push_back(s.what);
        bytes += s.bytes;
    }
    CHECK(std::count(what.begin(), what.end(), "HWRM response and short-command buffers") == 1);
    CHECK(std::count(what.begin(), what.end(), "CREQ ring " + std::to_string(f.fw.rings().begin()->first) + " pages") == 1);
    CHECK(std::count(what.begin(), what.end(), "statistics buffer") == 1);
    CHECK(std::count_if(what.begin(), what.end(), [](const std::string& w) { return w.find("context pages") != std::string::npos; }) >= 9);
    CHECK(bytes == 8192 + ctx_bytes + 4096 + 16 * 4096 + 4096);
    CHECK(mapped_bytes(f) == bytes);
    d->reset();
    CHECK(mapped_bytes(f) == bytes);  // never unmapped
    CHECK(f.fw.context_violations().empty());
}
