// firmware/bnxt against the bnxt function model (sim/bnxt/function_model.hpp) served over
// vfio-user in this process and opened as a driver opens it (driver::open("vfio-user:...")):
// bring-up and teardown cycles with the model's ledger empty after each, a refusal's text, the
// model requiring short commands, silence at teardown, a dead function.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "abi/bnxt/hwrm.hpp"
#include "driver/function.hpp"
#include "abi/bnxt/rcfw.hpp"
#include "firmware/bnxt/device.hpp"
#include "firmware/bnxt/rcfw.hpp"
#include "sim/bnxt/function_model.hpp"
#include "sim/vfio_user/server.hpp"
#include "served_bnxt.hpp"

using namespace std::chrono_literals;
namespace abi = rig::bnxt::abi;
namespace fw = rig::firmware::bnxt;
using clk = std::chrono::steady_clock;

using rig::test::bnxt_fw::served_bnxt;

namespace {

fw::device_options small() {
    fw::device_options o;
    o.creq_entries = 1024;
    o.roce_channel = false;   // the L2 bring-up; the RoCE test below turns it back on
    return o;
}

}  // namespace

// Issue 14's "bring-up and teardown 100 times with nothing leaked on either side": the whole
// bring-up, both channels (14 HWRM requests, then QUERY_FUNC, INITIALIZE_FW, ADD_GID).
TEST_CASE("bnxt fw served: 100 bring-up and teardown cycles over vfio-user, the model's ledger empty", "[model][bnxt_fw]") {
    served_bnxt m;
    for (int i = 0; i < 100; ++i) {
        INFO("cycle " << i);
        std::vector<std::string> names;
        auto o = small();
        o.roce_channel = true;
        o.rcfw.cmdq_slots = 256;
        o.trace = [&](const fw::command_record& r) { names.emplace_back(r.name); };
        auto d = fw::device::bring_up(*m.f, o);
        REQUIRE(d.has_value());
        CHECK(names.size() == 14 + 4);   // + QUERY_FUNC, INITIALIZE_FW, RING_ALLOC (NQ), ADD_GID
        m.fn.with_firmware([](const rig::sim::bnxt::firmware& f) {
            CHECK(f.rcfw().initialized);
            CHECK(f.rcfw().gids[0].has_value());
        });
        CHECK(m.fn.roce_backing_store());
        CHECK(m.fn.roce_receive_ready());
        CHECK(m.fn.rings() == 2);   // the CREQ and the NQ
        REQUIRE((*d)->teardown().has_value());
        CHECK((*d)->stranded().empty());
        d->reset();
        CHECK(m.fn.context_pages() == 0);
        CHECK(m.fn.rings() == 0);
        CHECK(m.fn.context_violations().empty());
        m.fn.with_firmware([](const rig::sim::bnxt::firmware& f) {
            CHECK_FALSE(f.rcfw().initialized);
            CHECK(f.rcfw().gids.empty());
            CHECK_FALSE(f.registered());
        });
    }
}

TEST_CASE("bnxt fw served: a refused FUNC_BACKING_STORE_CFG is named with its error code and cmd_err", "[model][bnxt_fw]") {
    served_bnxt m;
    m.fn.fail_next(abi::HWRM_FUNC_BACKING_STORE_CFG, abi::HWRM_ERR_CODE_INVALID_PARAMS, 0x1);
    auto d = fw::device::bring_up(*m.f, small());
    REQUIRE_FALSE(d.has_value());
    CHECK(d.error().kind == fw::error_kind::status);
    CHECK(d.error().message == "bring-up step BACKING_STORE: FUNC_BACKING_STORE_CFG (0x193): INVALID_PARAMS (0x2), cmd_err 0x1");
    CHECK(m.fn.context_pages() == 0);
    CHECK(m.fn.context_violations().empty());
    // the next bring-up goes through
    auto again = fw::device::bring_up(*m.f, small());
    REQUIRE(again.has_value());
    CHECK((*again)->teardown().has_value());
}

TEST_CASE("bnxt fw served: the model requiring short commands gets them", "[model][bnxt_fw]") {
    rig::sim::bnxt::function_options o;
    o.firmware.short_cmd_required = true;
    served_bnxt m(o);
    std::vector<fw::command_record> trace;
    auto opts = small();
    opts.trace = [&](const fw::command_record& r) { trace.push_back(r); };
    auto d = fw::device::bring_up(*m.f, opts);
    REQUIRE(d.has_value());
    REQUIRE(trace.size() == 14);
    CHECK_FALSE(trace[0].short_command);  // VER_GET: the requirement not known yet
    for (std::size_t i = 1; i < trace.size(); ++i) {
        INFO(trace[i].name);
        CHECK(trace[i].short_command);
    }
    CHECK((*d)->teardown().has_value());
}

TEST_CASE("bnxt fw served: a silent firmware at teardown; a dead function at bring-up", "[model][bnxt_fw]") {
    SECTION("silence") {
        served_bnxt m;
        auto d = fw::device::bring_up(*m.f, small());
        REQUIRE(d.has_value());
        m.fn.silence();
        const auto start = clk::now();
        auto r = (*d)->teardown();
        REQUIRE_FALSE(r.has_value());
        const auto model_timeout = std::chrono::milliseconds(rig::sim::bnxt::firmware_options{}.def_req_timeout_ms);
        CHECK(clk::now() - start < 4 * model_timeout);
        CHECK(r.error().message == "teardown step RING_FREE: RING_FREE (0x51): no response within " +
                                          std::to_string(model_timeout.count()) + " ms");
        CHECK((*d)->stranded().size() >= 12);
        CHECK(m.fn.context_violations().empty());  // nothing the firmware owns was unmapped
    }
    SECTION("death") {
        served_bnxt m;
        m.fn.die();
        const auto start = clk::now();
        auto d = fw::device::bring_up(*m.f, small());
        REQUIRE_FALSE(d.has_value());
        CHECK(clk::now() - start < 2s);
        CHECK(d.error().message == "bring-up step VER_GET: VER_GET (0x0): no response within 500 ms");
    }
}

TEST_CASE("bnxt fw served: the RoCE channel against the model's RCFW", "[model][bnxt_fw]") {
    served_bnxt m;
    std::vector<fw::command_record> trace;
    CHECK(fw::device_options{}.roce_channel);   // on by default
    auto o = small();
    o.roce_channel = true;
    o.trace = [&](const fw::command_record& r) { trace.push_back(r); };
    auto d = fw::device::bring_up(*m.f, o);
    // The model answers QUERY_FUNC, INITIALIZE_FW and ADD_GID: READY with the link-local GID
    // of the MAC in the model's GID table, at the index ADD_GID answered.
    if (!d) {
        FAIL(d.error().message);
    }
    auto& dev = **d;
    REQUIRE(trace.size() == 14 + 4);
    CHECK(trace[14].name == "QUERY_FUNC");
    CHECK(trace[15].name == "INITIALIZE_FW");
    CHECK(trace[16].name == "RING_ALLOC");   // the NQ
    CHECK(trace[17].name == "ADD_GID");
    CHECK(trace[17].status == 0);
    const auto mac = m.fn.with_firmware([](const rig::sim::bnxt::firmware& f) { return f.options().mac; });
    const std::array<std::uint8_t, 16> gid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, static_cast<std::uint8_t>(mac[0] ^ 2),
                                              mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]};
    CHECK(dev.gid() == gid);
    REQUIRE(dev.gid_index().has_value());
    CHECK(*dev.gid_index() == 0);
    m.fn.with_firmware([&](const rig::sim::bnxt::firmware& f) {
        REQUIRE(f.rcfw().gids.size() == f.options().max_gid);
        REQUIRE(f.rcfw().gids[0].has_value());
        CHECK(f.rcfw().gids[0]->gid == gid);
        CHECK(f.rcfw().gids[0]->src_mac == mac);
    });
    trace.clear();
    REQUIRE(dev.teardown().has_value());
    REQUIRE(trace.size() >= 4);
    CHECK(trace[0].name == "DELETE_GID");
    CHECK(trace[0].status == 0);
    CHECK(trace[1].name == "RING_FREE");   // the NQ
    CHECK(trace[2].name == "DEINITIALIZE_FW");
    CHECK(trace[2].status == 0);
    CHECK(trace[3].name == "RING_FREE");   // the CREQ
    CHECK(dev.stranded().empty());
    CHECK(m.fn.context_pages() == 0);
    CHECK(m.fn.rings() == 0);
    CHECK(m.fn.context_violations().empty());
}

TEST_CASE("bnxt fw served: RCFW commands by the channel: QUERY_VERSION, QUERY_FUNC, INITIALIZE_FW", "[model][bnxt_fw]") {
    served_bnxt m;
    auto d = fw::device::bring_up(*m.f, small());
    REQUIRE(d.has_value());
    auto& dev = **d;
    auto ch = fw::rcfw_channel::create(*m.f, dev.stranded_registry(),
                                       {dev.creq_ring_id(), dev.creq_memory(), dev.creq_entries(), dev.doorbell_offset()});
    REQUIRE(ch.has_value());
    const auto by = [] { return clk::now() + 5s; };
    auto v = (*ch)->send<abi::creq_query_version_resp>(abi::cmdq_query_version{}, 0, by());
    REQUIRE(v.has_value());
    CHECK(v->event == abi::CMDQ_BASE_OPCODE_QUERY_VERSION);
    // before INITIALIZE_FW only QUERY_FUNC, INITIALIZE_FW and QUERY_VERSION are taken
    auto early = (*ch)->send<abi::creq_deinitialize_fw_resp>(abi::cmdq_deinitialize_fw{}, 0, by());
    REQUIRE_FALSE(early.has_value());
    CHECK(early.error().message == "DEINITIALIZE_FW (0x81): INVALID_CMD (0x3)");
    std::vector<std::byte> side;
    auto q = (*ch)->send<abi::creq_query_func_resp>(abi::cmdq_query_func{}, 160, by(), &side);
    REQUIRE(q.has_value());
    auto sb = abi::decode<abi::creq_query_func_resp_sb>(side);
    REQUIRE(sb.has_value());
    CHECK(sb->max_qp > 0);
    CHECK(sb->max_sge == 6);
    abi::cmdq_initialize_fw init;
    init.stat_ctx_id = dev.stat_ctx_id();
    REQUIRE((*ch)->send<abi::creq_initialize_fw_resp>(init, 0, by()).has_value());
    for (int i = 0; i < 1100; ++i) {  // the 1024-entry CREQ's second pass (v = 0)
        REQUIRE((*ch)->send<abi::creq_query_version_resp>(abi::cmdq_query_version{}, 0, by()).has_value());
    }
    REQUIRE((*ch)->send<abi::creq_deinitialize_fw_resp>(abi::cmdq_deinitialize_fw{}, 0, by()).has_value());
    CHECK((*ch)->failure() == std::nullopt);
    ch->reset();
    CHECK(dev.teardown().has_value());
    CHECK(dev.stranded().empty());
    CHECK(m.fn.context_violations().empty());
}

// Event mode (device_options::rcfw_events): MSI-X enabled, the CREQ armed with NQ_ARM, the
// channel's waiters woken by the CREQ's vector (the model raises it for every batch of
// completions on an MSI-X NQ), then teardown with the vectors disabled again.
TEST_CASE("bnxt fw served: the RoCE channel in event mode, woken by the CREQ's MSI-X vector", "[model][bnxt_fw]") {
    // 2 ms of firmware time per command: the waiter finds nothing at its first poll and sleeps on
    // the eventfd, so every command is completed by an interrupt (none can be missed by luck)
    rig::sim::bnxt::function_options mo;
    mo.command_latency = std::chrono::milliseconds(2);
    served_bnxt m(mo);
    auto o = small();
    o.roce_channel = true;
    o.rcfw_events = true;
    o.rcfw.cmdq_slots = 256;
    auto d = fw::device::bring_up(*m.f, o);
    REQUIRE(d.has_value());
    auto& ch = *(*d)->rcfw();
    CHECK(ch.event_mode());
    for (int i = 0; i < 20; ++i) {
        auto v = ch.send<abi::creq_query_version_resp>(abi::cmdq_query_version{}, 0, clk::now() + 5s);
        REQUIRE(v.has_value());
        CHECK(v->event == abi::CMDQ_BASE_OPCODE_QUERY_VERSION);
    }
    CHECK(ch.interrupts() >= 20);   // one per command at least
    REQUIRE((*d)->teardown().has_value());
    CHECK((*d)->stranded().empty());
    CHECK(m.fn.rings() == 0);
    // polling mode takes none
    auto p = small();
    p.roce_channel = true;
    p.rcfw.cmdq_slots = 256;
    auto polled = fw::device::bring_up(*m.f, p);
    REQUIRE(polled.has_value());
    CHECK_FALSE((*polled)->rcfw()->event_mode());
    CHECK((*polled)->rcfw()->interrupts() == 0);
    REQUIRE((*polled)->teardown().has_value());
}
