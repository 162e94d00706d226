// firmware/bnxt's RoCE command channel (CMDQ/CREQ) against a stand-in RoCE firmware in the
// test function (firmware_function.hpp: the model answers no RCFW yet), over the CREQ the
// device brought up by HWRM: cmdq_init's bytes, slots and cookies, the first producer's bit 31,
// side buffers, CREQ phases and doorbells, completions out of order, a refusal, silence.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "abi/bits.hpp"
#include "abi/bnxt/doorbell.hpp"
#include "abi/bnxt/rcfw.hpp"
#include "firmware/bnxt/device.hpp"
#include "firmware/bnxt/rcfw.hpp"
#include "test/model/bnxt_fw/firmware_function.hpp"

using namespace std::chrono_literals;
namespace abi = rig::bnxt::abi;
namespace fw = rig::firmware::bnxt;
using rig::test::bnxt::firmware_function;
using clk = std::chrono::steady_clock;

namespace {

struct rig_up {
    firmware_function f;
    std::unique_ptr<fw::device> dev;
    std::unique_ptr<fw::rcfw_channel> ch;
    explicit rig_up(fw::rcfw_options o = {}, std::uint32_t creq_entries = 256) {
        fw::device_options d;
        d.creq_entries = creq_entries;
        d.roce_channel = false;   // this test's own channel speaks to the CREQ
        auto up = fw::device::bring_up(f, d);
        REQUIRE(up.has_value());
        dev = std::move(*up);
        auto c = fw::rcfw_channel::create(f, dev->stranded_registry(),
                                          {dev->creq_ring_id(), dev->creq_memory(), dev->creq_entries(),
                                           dev->doorbell_offset()},
                                          o);
        REQUIRE(c.has_value());
        ch = std::move(*c);
    }
};

}  // namespace

TEST_CASE("bnxt rcfw: cmdq_init, QUERY_VERSION, cookies, the first producer's bit 31", "[model][bnxt_fw]") {
    rig_up r;
    // cmdq_init at BAR0 0x600: the PBL, level 1, 8192 slots, the CREQ's ring id, producer 0
    CHECK(rig::abi::load_le<std::uint64_t>(r.f.bar0.data() + 0x600) == r.ch->cmdq_pbl_iova());
    CHECK(rig::abi::load_le<std::uint16_t>(r.f.bar0.data() + 0x608) == (8192u << 2 | 1));
    CHECK(rig::abi::load_le<std::uint16_t>(r.f.bar0.data() + 0x60a) == r.dev->creq_ring_id());
    std::vector<fw::command_record> trace;
    r.ch->trace([&](const fw::command_record& c) { trace.push_back(c); });
    for (int i = 0; i < 3; ++i) {
        auto v = r.ch->send<abi::creq_query_version_resp>(abi::cmdq_query_version{}, 0, clk::now() + 1s);
        REQUIRE(v.has_value());
        CHECK(v->cookie == i);
        CHECK(v->event == abi::CMDQ_BASE_OPCODE_QUERY_VERSION);
        CHECK(v->fw_maj == 0x44);  // the stand-in's xid bytes
    }
    // cmdq_init's own prod_idx word (0), then the producers: bit 31 on the first only
    CHECK(r.f.producers == std::vector<std::uint32_t>{0, 0x80000001u, 2, 3});
    REQUIRE(r.f.rcfw_commands.size() == 3);
    const auto& c = r.f.rcfw_commands[1];
    CHECK(std::to_integer<int>(c[0]) == 0x8b);
    CHECK(std::to_integer<int>(c[1]) == 1);  // one slot
    CHECK(rig::abi::load_le<std::uint16_t>(c.data() + 4) == 1);
    CHECK(std::to_integer<int>(c[6]) == 0);
    // each poll that consumed acknowledged the CREQ: NQ doorbell, the ring's id, the consumer
    REQUIRE(r.f.bar2_writes.size() == 3);
    const auto db = abi::doorbell_fields(r.f.bar2_writes[2]);
    CHECK(db.type == abi::DBC_DBC_TYPE_NQ);
    CHECK(db.xid == r.dev->creq_ring_id());
    CHECK(db.index == 3);
    CHECK(db.path == abi::DBC_DBC_PATH_ROCE);
    REQUIRE(trace.size() == 3);
    CHECK(trace[0].channel == "rcfw");
    CHECK(trace[0].name == "QUERY_VERSION");
    CHECK(fw::to_json(trace[0]).starts_with("{\"channel\": \"rcfw\", \"opcode\": 139, \"name\": \"QUERY_VERSION\", \"status\": 0"));
}

TEST_CASE("bnxt rcfw: QUERY_FUNC's side buffer, and the CREQ's phase across its wrap", "[model][bnxt_fw]") {
    rig_up r;
    std::vector<std::byte> side;
    auto q = r.ch->send<abi::creq_query_func_resp>(abi::cmdq_query_func{}, 160, clk::now() + 1s, &side);
    REQUIRE(q.has_value());
    REQUIRE(side.size() == 160);
    CHECK(std::to_integer<int>(side[0]) == 0x83);
    CHECK(std::to_integer<int>(side[6]) == 10);  // resp_size in 16-byte units
    CHECK(std::to_integer<int>(side[100]) == 0xab);
    CHECK(std::to_integer<int>(r.f.rcfw_commands[0][6]) == 10);
    // 600 more commands: the 256-entry CREQ wraps twice, v flips each pass
    for (int i = 0; i < 600; ++i) {
        REQUIRE(r.ch->send<abi::creq_query_version_resp>(abi::cmdq_query_version{}, 0, clk::now() + 1s).has_value());
    }
    CHECK(r.f.creq_written == 601);
    const auto db = abi::doorbell_fields(r.f.bar2_writes.back());
    CHECK(db.index == 601 % 256);
    CHECK(db.epoch == 0);  // 601 / 256 = 2 passes
    REQUIRE(r.ch->failure() == std::nullopt);
    CHECK(r.dev->teardown().has_value());
}

TEST_CASE("bnxt rcfw: two commands outstanding complete out of order, each to its own caller", "[model][bnxt_fw]") {
    rig_up r;
    r.f.rcfw_hold = 2;
    std::optional<fw::result<abi::creq_query_version_resp>> a;
    std::thread t([&] { a = r.ch->send<abi::creq_query_version_resp>(abi::cmdq_query_version{}, 0, clk::now() + 5s); });
    while (r.f.rcfw_seen.load(std::memory_order_acquire) == 0) {
        std::this_thread::sleep_for(1ms);
    }
    std::vector<std::byte> side;
    auto b = r.ch->send<abi::creq_query_func_resp>(abi::cmdq_query_func{}, 160, clk::now() + 5s, &side);
    t.join();
    REQUIRE(a.has_value());
    REQUIRE(a->has_value());
    REQUIRE(b.has_value());
    CHECK((*a)->cookie == 0);
    CHECK((*a)->event == abi::CMDQ_BASE_OPCODE_QUERY_VERSION);
    CHECK(b->cookie == 1);
    CHECK(b->event == abi::CMDQ_BASE_OPCODE_QUERY_FUNC);
    CHECK(std::to_integer<int>(side[0]) == 0x83);
}

TEST_CASE("bnxt rcfw: a refusal is named; silence strands the CMDQ and stops the channel", "[model][bnxt_fw]") {
    rig_up r(fw::rcfw_options{8192, 300ms});
    r.f.rcfw_status = abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER;
    auto q = r.ch->send<abi::creq_query_func_resp>(abi::cmdq_query_func{}, 160, clk::now() + 1s);
    REQUIRE_FALSE(q.has_value());
    CHECK(q.error().channel == "rcfw");
    CHECK(q.error().kind == fw::error_kind::status);
    CHECK(q.error().error_code == 5);
    CHECK(q.error().message == "QUERY_FUNC (0x83): INVALID_PARAMETER (0x5)");
    r.f.rcfw_status = 0;
    r.f.rcfw_silent = true;
    const auto start = clk::now();
    auto s = r.ch->send<abi::creq_query_version_resp>(abi::cmdq_query_version{}, 0, clk::now() + 5s);
    REQUIRE_FALSE(s.has_value());
    CHECK(clk::now() - start < 1s);
    CHECK(s.error().kind == fw::error_kind::timeout);
    CHECK(s.error().message == "QUERY_VERSION (0x8b): no completion within 300 ms");
    bool cmdq = false;
    for (const auto& st : r.dev->stranded()) {
        cmdq = cmdq || (st.what == "CMDQ and its PBL" && st.iova == r.ch->cmdq_iova());
    }
    CHECK(cmdq);
    const auto sent = r.f.rcfw_commands.size();
    auto again = r.ch->send<abi::creq_query_version_resp>(abi::cmdq_query_version{}, 0, clk::now() + 1s);
    REQUIRE_FALSE(again.has_value());
    CHECK(again.error().kind == fw::error_kind::fatal);
    CHECK(r.f.rcfw_commands.size() == sent);
}

TEST_CASE("bnxt device with the RoCE channel: QUERY_FUNC, INITIALIZE_FW, ADD_GID; DELETE_GID, DEINITIALIZE_FW first at teardown",
          "[model][bnxt_fw]") {
    firmware_function f;
    std::vector<fw::command_record> trace;
    fw::device_options o;
    o.creq_entries = 256;
    o.roce_channel = true;
    o.trace = [&](const fw::command_record& r) { trace.push_back(r); };
    auto d = fw::device::bring_up(f, o);
    REQUIRE(d.has_value());
    REQUIRE(trace.size() == 18);
    CHECK(trace[13].name == "RING_ALLOC");
    CHECK(trace[14].channel == "rcfw");
    CHECK(trace[14].name == "QUERY_FUNC");
    CHECK(trace[15].name == "INITIALIZE_FW");
    CHECK(trace[16].name == "RING_ALLOC");   // the RoCE NQ, after INITIALIZE_FW (bnxt_re_alloc_res)
    CHECK(trace[16].channel == "hwrm");
    CHECK(trace[17].name == "ADD_GID");
    auto& dev = **d;
    // QUERY_FUNC's limits with bnxt_qplib_get_dev_attr's adjustments (the stand-in fills 0xab)
    CHECK(dev.roce().max_qp == 0xabababab + 1u);
    CHECK(dev.roce().max_qp_wr == 0xabab - 1u);
    CHECK(dev.roce().max_cqe == 0xfffff);
    // INITIALIZE_FW: 112 bytes in 7 slots, the RoCE stat context, HW retransmission (0xabab has 0x200)
    const auto& init = trace[15].in;
    REQUIRE(init.size() == 112);
    CHECK(std::to_integer<int>(init[1]) == 7);
    CHECK(rig::abi::load_le<std::uint32_t>(init.data() + 108) == dev.stat_ctx_id());
    CHECK((rig::abi::load_le<std::uint16_t>(init.data() + 2) & abi::CMDQ_INITIALIZE_FW_FLAGS_HW_REQUESTER_RETX_SUPPORTED) != 0);
    for (std::size_t i = 16; i < 72; ++i) {
        CHECK(std::to_integer<int>(init[i]) == 0);  // no context tables on P5
    }
    // ADD_GID: fe80::(mac ^ U/L, ff:fe), bytes reversed; the MAC's pairs swapped
    const auto mac = f.fw.options().mac;
    const std::array<std::uint8_t, 16> gid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, static_cast<std::uint8_t>(mac[0] ^ 2),
                                              mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]};
    CHECK(dev.gid() == gid);
    const auto& add = trace[17].in;
    for (std::size_t i = 0; i < 16; ++i) {
        CHECK(std::to_integer<std::uint8_t>(add[16 + i]) == gid[15 - i]);
    }
    CHECK(std::to_integer<std::uint8_t>(add[32]) == mac[1]);
    CHECK(std::to_integer<std::uint8_t>(add[33]) == mac[0]);
    CHECK(rig::abi::load_le<std::uint16_t>(add.data() + 38) == 0);  // no VLAN
    REQUIRE(dev.gid_index().has_value());
    CHECK(*dev.gid_index() == 0x11223344u);
    const std::uint16_t nq = dev.nq_ring_id();
    CHECK(nq != dev.creq_ring_id());
    trace.clear();
    REQUIRE(dev.teardown().has_value());
    REQUIRE(trace.size() == 9);
    CHECK(trace[0].name == "DELETE_GID");   // the GID bring-up added, by its firmware index
    CHECK(rig::abi::load_le<std::uint16_t>(trace[0].in.data() + 16) == 0x3344);
    CHECK(trace[1].name == "RING_FREE");    // the NQ (bnxt_re_free_res before bnxt_qplib_deinit_rcfw)
    CHECK(rig::abi::load_le<std::uint16_t>(trace[1].in.data() + 18) == nq);
    CHECK(trace[2].name == "DEINITIALIZE_FW");
    CHECK(trace[3].name == "RING_FREE");    // the CREQ
    CHECK(dev.stranded().empty());
    d->reset();
    CHECK(f.maps.empty());
}

// Found by fuzz bnxt-creq: under 256 slots the CMDQ's size rounded down to no page, its slots
// lay on the PBL's page and the firmware read the first command as a PTE.
TEST_CASE("bnxt rcfw: the smallest CMDQ (16 slots) has a page of its own behind a valid PTE", "[model][bnxt_fw]") {
    rig_up r({.cmdq_slots = 16});
    CHECK(r.ch->cmdq_pbl_iova() == r.ch->cmdq_iova() + 4096);   // the slots' page, then the PBL's
    for (int i = 0; i < 20; ++i) {   // past the 16-slot wrap
        auto v = r.ch->send<abi::creq_query_version_resp>(abi::cmdq_query_version{}, 0, clk::now() + 1s);
        REQUIRE(v.has_value());
        CHECK(v->cookie == i);
    }
    REQUIRE(r.f.rcfw_commands.size() == 20);
    CHECK(std::to_integer<int>(r.f.rcfw_commands.back()[0]) == 0x8b);
}
