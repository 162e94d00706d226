// The bnxt model's RoCE command channel (roce_hsi.h, qplib_rcfw.c): cmdq_init in the BAR0 mailbox,
// the first producer with FIRMWARE_FIRST_FLAG, commands of cmd_size slots with cookies, several
// outstanding, completions on the CREQ NQ with the valid bit by pass and its MSI-X vector,
// QUERY_VERSION, QUERY_FUNC's side buffer, INITIALIZE_FW / DEINITIALIZE_FW, and the statuses
// of what is not allowed or not implemented. Driven by raw BAR0 writes, as bnxt_qplib does.
#include "roce_channel.hpp"

using namespace rig::test::bnxt;
namespace sim = rig::sim;

TEST_CASE("bnxt model rcfw: QUERY_VERSION and QUERY_FUNC before INITIALIZE_FW", "[bnxt_model][rcfw]") {
    served_bnxt m;
    context_memory cm(m);
    roce_backing_store(m, cm);
    roce_channel ch(m);
    std::array<std::byte, 16> raw{};
    const auto v = ch.run(abi::cmdq_query_version{}, &raw);
    CHECK(v.status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    CHECK(v.event == abi::CMDQ_BASE_OPCODE_QUERY_VERSION);
    CHECK(v.v == 1);
    const auto ver = *abi::decode<abi::creq_query_version_resp>(raw);
    CHECK(ver.fw_maj == 230);
    CHECK(ver.intf_maj == 1);
    CHECK(ver.intf_minor == 10);
    CHECK(ch.interrupts(1) >= 1);   // the CREQ's vector (logical_id 1)

    const auto sb = m.alloc(4096);
    abi::cmdq_query_func q;
    q.resp_addr = sb.iova;
    const auto f = ch.run(q, &raw);
    CHECK(f.status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    CHECK(abi::decode<abi::creq_query_func_resp>(raw)->size == 10);
    const auto s = *abi::decode<abi::creq_query_func_resp_sb>(std::span<const std::byte>(sb.host, 160));
    CHECK(s.opcode == abi::CMDQ_BASE_OPCODE_QUERY_FUNC);
    CHECK(s.cookie == f.cookie);
    CHECK(s.resp_size == 10);
    CHECK(s.max_qp == 4096 - 256 - 64);
    CHECK(s.max_sge == 6);
    CHECK(s.max_dpi == ((4u << 20) - (128u << 10)) / 4096);
    CHECK(s.l2_db_space_size == 31);
    CHECK(s.max_mr == 16384);
    // a side buffer too small for it
    q.resp_size = 2;
    CHECK(ch.run(q).status == abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
    // other commands wait for INITIALIZE_FW
    CHECK(ch.run(abi::cmdq_create_cq{}).status == abi::CREQ_QP_EVENT_STATUS_INVALID_CMD);
    CHECK(ch.run(abi::cmdq_deinitialize_fw{}).status == abi::CREQ_QP_EVENT_STATUS_INVALID_CMD);
}

TEST_CASE("bnxt model rcfw: INITIALIZE_FW needs RoCE-sized context memory and a stat context", "[bnxt_model][rcfw]") {
    SECTION("without the backing store: RESOURCES") {
        served_bnxt m;
        const std::uint32_t stat = roce_stat_ctx(m);
        roce_channel ch(m);
        abi::cmdq_initialize_fw init;
        init.stat_ctx_id = stat;
        CHECK(ch.run(init).status == abi::CREQ_QP_EVENT_STATUS_RESOURCES);
    }
    SECTION("with it") {
        served_bnxt m;
        context_memory cm(m);
        roce_backing_store(m, cm);
        const std::uint32_t stat = roce_stat_ctx(m);
        roce_channel ch(m);
        abi::cmdq_initialize_fw init;
        init.stat_ctx_id = stat + 5;
        CHECK(ch.run(init).status == abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
        init.stat_ctx_id = stat;
        CHECK(ch.run(init).status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
        m.fn.with_firmware([](const sim::bnxt::firmware& f) { CHECK(f.rcfw().initialized); });
        CHECK(ch.run(init).status == abi::CREQ_QP_EVENT_STATUS_INVALID_CMD);
        // what the model does not implement yet is said so, never "OK"
        CHECK(ch.run(abi::cmdq_modify_gid{}).status == abi::CREQ_QP_EVENT_STATUS_NOT_IMPLEMENTED);
        CHECK(ch.run(abi::cmdq_deinitialize_fw{}).status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
        m.fn.with_firmware([](const sim::bnxt::firmware& f) { CHECK_FALSE(f.rcfw().initialized); });
    }
}

TEST_CASE("bnxt model rcfw: several commands outstanding, the CREQ's phase by pass", "[bnxt_model][rcfw]") {
    served_bnxt m;
    roce_channel ch(m, 8, 64);   // an 8-entry CREQ: its second pass has v = 0
    std::vector<std::uint16_t> cookies;
    for (int i = 0; i < 3; ++i) {
        cookies.push_back(ch.queue(abi::cmdq_query_version{}));
    }
    ch.ring();   // one producer write for three commands
    for (std::uint16_t k : cookies) {
        const auto e = ch.next();
        REQUIRE(e.has_value());
        CHECK(abi::decode<abi::creq_qp_event>(*e)->cookie == k);
    }
    for (int i = 0; i < 7; ++i) {   // entries 3..9: 8 and 9 on the second pass
        const auto ev = ch.run(abi::cmdq_query_version{});
        CHECK(ev.status == 0);
        CHECK(ev.v == (ch.cons - 1 < 8 ? 1 : 0));
    }
    CHECK(ch.cons == 10);
    // the CMDQ wraps too: 64 slots, a 7-slot INITIALIZE_FW across the end
    while (ch.prod % 64 < 60) {
        ch.run(abi::cmdq_query_version{});
    }
    CHECK(ch.run(abi::cmdq_initialize_fw{}).status == abi::CREQ_QP_EVENT_STATUS_RESOURCES);
    CHECK(ch.run(abi::cmdq_query_version{}).status == 0);
}

TEST_CASE("bnxt model rcfw: the channel starts only from a good cmdq_init", "[bnxt_model][rcfw]") {
    served_bnxt m;
    roce_channel ch(m);
    SECTION("a producer without FIRMWARE_FIRST_FLAG first: nothing runs") {
        ch.first = false;
        ch.queue(abi::cmdq_query_version{});
        ch.ring();
        CHECK_FALSE(ch.next(200ms).has_value());
        m.fn.with_firmware([](const sim::bnxt::firmware& f) { CHECK_FALSE(f.rcfw().enabled); });
    }
    SECTION("a CREQ ring id that names no NQ") {
        m.write32(abi::RCFW_COMM_BASE_OFFSET + 8, 1024u << 2 | 1 | (std::uint32_t{77} << 16));
        ch.queue(abi::cmdq_query_version{});
        ch.ring();
        CHECK_FALSE(ch.next(200ms).has_value());
        m.fn.with_firmware([](const sim::bnxt::firmware& f) {
            CHECK(f.rcfw().last_error.find("no NQ ring") != std::string::npos);
        });
    }
    SECTION("a chosen CREQ status for the next command of an opcode") {
        m.fn.fail_next_rcfw(abi::CMDQ_BASE_OPCODE_QUERY_VERSION, abi::CREQ_QP_EVENT_STATUS_HARDWARE_ERROR);
        CHECK(ch.run(abi::cmdq_query_version{}).status == abi::CREQ_QP_EVENT_STATUS_HARDWARE_ERROR);
        CHECK(ch.run(abi::cmdq_query_version{}).status == 0);
    }
    SECTION("freeing the CREQ stops the channel") {
        CHECK(ch.run(abi::cmdq_query_version{}).status == 0);
        abi::hwrm_ring_free_input f;
        f.ring_type = abi::RING_ALLOC_REQ_RING_TYPE_NQ;
        f.ring_id = ch.creq_id;
        CHECK(m.send(f).error_code() == 0);
        m.fn.with_firmware([](const sim::bnxt::firmware& fw) { CHECK_FALSE(fw.rcfw().enabled); });
    }
}

TEST_CASE("bnxt model rcfw: ADD_GID into the table, DELETE_GID by its index, the refusals", "[bnxt_model][rcfw]") {
    sim::bnxt::function_options fo;
    fo.firmware.max_gid = 4;   // a small table, to fill it
    served_bnxt m(fo);
    context_memory cm(m);
    roce_backing_store(m, cm);
    const std::uint32_t stat = roce_stat_ctx(m);
    roce_channel ch(m);
    const std::array<std::uint8_t, 6> mac{0x02, 0x52, 0x49, 0x47, 0x50, 0x00};
    // fe80::52:49ff:fe47:5000 ... as the driver sends it: bytes reversed, the MAC's pairs swapped
    auto add = [&](std::uint8_t last) {
        std::array<std::uint8_t, 16> gid{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x52, 0x49, 0xff, 0xfe, 0x47, 0x50, last};
        abi::cmdq_add_gid c;
        c.gid = abi::add_gid_gid(gid);
        c.src_mac = abi::add_gid_src_mac(mac);
        return std::pair{c, gid};
    };
    auto [first, first_gid] = add(0x00);
    // before INITIALIZE_FW: refused, as every command but the three
    CHECK(ch.run(first).status == abi::CREQ_QP_EVENT_STATUS_INVALID_CMD);
    abi::cmdq_delete_gid del;
    CHECK(ch.run(del).status == abi::CREQ_QP_EVENT_STATUS_INVALID_CMD);
    abi::cmdq_initialize_fw init;
    init.stat_ctx_id = stat;
    REQUIRE(ch.run(init).status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);

    // QUERY_FUNC's max_gid is the table's size
    const auto sb = m.alloc(4096);
    abi::cmdq_query_func q;
    q.resp_addr = sb.iova;
    REQUIRE(ch.run(q).status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    CHECK(abi::decode<abi::creq_query_func_resp_sb>(std::span<const std::byte>(sb.host, 160))->max_gid == 4);

    std::array<std::byte, 16> raw{};
    const auto e = ch.run(first, &raw);
    CHECK(e.status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    CHECK(e.event == abi::CMDQ_BASE_OPCODE_ADD_GID);
    CHECK(abi::decode<abi::creq_add_gid_resp>(raw)->xid == 0);
    m.fn.with_firmware([&](const sim::bnxt::firmware& f) {
        REQUIRE(f.rcfw().gids.size() == 4);
        REQUIRE(f.rcfw().gids[0].has_value());
        CHECK(f.rcfw().gids[0]->gid == first_gid);   // wire order: the driver's reversal undone
        CHECK(f.rcfw().gids[0]->src_mac == mac);
        CHECK(f.rcfw().gids[0]->vlan == 0);
        CHECK_FALSE(f.rcfw().gids[0]->stats_ctx.has_value());
    });
    // the same GID again: refused; on another VLAN: a second entry
    CHECK(ch.run(first).status == abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
    auto tagged = first;
    tagged.vlan_id = 7;
    tagged.tpid = abi::CMDQ_ADD_GID_VLAN_TPID_TPID_8100;
    tagged.vlan_en = 1;
    tagged.stats_ctx_id = static_cast<std::uint16_t>(stat);
    tagged.stats_ctx_valid = 1;
    CHECK(ch.run(tagged, &raw).status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    CHECK(abi::decode<abi::creq_add_gid_resp>(raw)->xid == 1);
    m.fn.with_firmware([&](const sim::bnxt::firmware& f) {
        CHECK(f.rcfw().gids[1]->vlan == (0x8000 | 0x1000 | 7));
        CHECK(f.rcfw().gids[1]->stats_ctx == std::optional<std::uint16_t>(static_cast<std::uint16_t>(stat)));
    });
    // bad fields
    auto zero = first;
    zero.gid = {};
    CHECK(ch.run(zero).status == abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
    auto group = add(0x10).first;
    group.src_mac = abi::add_gid_src_mac({0x01, 0x00, 0x5e, 0, 0, 1});
    CHECK(ch.run(group).status == abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
    auto vlan_fff = add(0x11).first;
    vlan_fff.vlan_id = 0x0fff;
    vlan_fff.vlan_en = 1;
    CHECK(ch.run(vlan_fff).status == abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
    auto no_stats = add(0x12).first;
    no_stats.stats_ctx_id = static_cast<std::uint16_t>(stat + 9);
    no_stats.stats_ctx_valid = 1;
    CHECK(ch.run(no_stats).status == abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
    // full: 4 entries
    CHECK(ch.run(add(0x02).first).status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    CHECK(ch.run(add(0x03).first).status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    CHECK(ch.run(add(0x04).first).status == abi::CREQ_QP_EVENT_STATUS_RESOURCES);

    // DELETE_GID by index; an index holding nothing (or past the table) refused
    del.gid_index = 1;
    CHECK(ch.run(del, &raw).status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    CHECK(abi::decode<abi::creq_delete_gid_resp>(raw)->xid == 1);
    CHECK(ch.run(del).status == abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
    del.gid_index = 4;
    CHECK(ch.run(del).status == abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
    // the freed slot is the next one taken
    CHECK(ch.run(add(0x04).first, &raw).status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    CHECK(abi::decode<abi::creq_add_gid_resp>(raw)->xid == 1);

    // DEINITIALIZE_FW empties the table; after a new INITIALIZE_FW index 0 is free again
    CHECK(ch.run(abi::cmdq_deinitialize_fw{}).status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    m.fn.with_firmware([](const sim::bnxt::firmware& f) { CHECK(f.rcfw().gids.empty()); });
    CHECK(ch.run(first).status == abi::CREQ_QP_EVENT_STATUS_INVALID_CMD);
    REQUIRE(ch.run(init).status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    CHECK(ch.run(first, &raw).status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    CHECK(abi::decode<abi::creq_add_gid_resp>(raw)->xid == 0);
    // a function reset drops it with the rest
    m.fn.reset();
    m.fn.with_firmware([](const sim::bnxt::firmware& f) { CHECK(f.rcfw().gids.empty()); });
}

// Found by fuzz bnxt-cmdq: a cmd_size running past the producer made the firmware step over it
// and circle the CMDQ forever on stale slots, its thread hung with the model's lock held.
TEST_CASE("bnxt model rcfw: a cmd_size past the producer is refused there, not run round the CMDQ", "[bnxt_model][rcfw]") {
    served_bnxt m;
    roce_channel ch(m, 256, 64);
    abi::cmdq_query_version q;
    q.cmd_size = 9;   // one slot written, nine claimed
    const std::uint16_t k = ch.queue(q);
    ch.ring();
    const auto e = ch.next();
    REQUIRE(e.has_value());
    const auto ev = *abi::decode<abi::creq_qp_event>(*e);
    CHECK(ev.cookie == k);
    CHECK(ev.event == abi::CMDQ_BASE_OPCODE_QUERY_VERSION);
    CHECK(ev.status == abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
    CHECK_FALSE(ch.next(100ms).has_value());   // one completion: the firmware waits at the producer
    CHECK(m.fn.with_firmware([](const sim::bnxt::firmware& f) { return f.rcfw().consumer; }) == 1);
    CHECK(ch.run(abi::cmdq_query_version{}).status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
}
