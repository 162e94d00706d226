// What Broadcom's own Linux drivers ask of the bnxt model beyond Rig's bring-up (issue 14 §4, the
// guest suite's judges): PORT_PHY_QCAPS, QUEUE_QPORTCFG, FW_SET_TIME, FUNC_CFG's cache line
// (bnxt.c bnxt_hwrm_phy_qcaps, bnxt_hwrm_queue_qportcfg, bnxt_hwrm_fw_set_time,
// bnxt_hwrm_set_cache_line_size), a TLV-framed RoCE command (qplib_sp.c bnxt_qplib_modify_cc)
// and the --report-ledger line after FUNC_DRV_UNRGTR. QP1's MODIFY_QP as bnxt_re sends it is in
// rcfw_objects_test.cpp.
#include "roce_channel.hpp"

using namespace rig::test::bnxt;
namespace sim = rig::sim;
using sim::bnxt::cmd_err;

TEST_CASE("bnxt model: PORT_PHY_QCAPS and QUEUE_QPORTCFG as bnxt_en reads them", "[bnxt_model][vendor_driver]") {
    served_bnxt m;
    const auto caps = m.send(abi::hwrm_port_phy_qcaps_input{}).as<abi::hwrm_port_phy_qcaps_output>();
    CHECK(caps.port_cnt == abi::PORT_PHY_QCAPS_RESP_PORT_CNT_1);
    CHECK(caps.supported_speeds_auto_mode == abi::PORT_PHY_QCAPS_RESP_SUPPORTED_SPEEDS_AUTO_MODE_100GB);
    CHECK(caps.supported_speeds_force_mode == abi::PORT_PHY_QCAPS_RESP_SUPPORTED_SPEEDS_FORCE_MODE_100GB);
    CHECK(caps.flags == 0);   // no EEE
    abi::hwrm_port_phy_qcaps_input p1;
    p1.port_id = 1;
    CHECK(m.send(p1).error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);

    // three queues: lossy, lossless RoCE, RoCE CNP; one lossless; the rest unknown (0xff)
    const auto q = m.send(abi::hwrm_queue_qportcfg_input{}).as<abi::hwrm_queue_qportcfg_output>();
    CHECK(q.max_configurable_queues == 3);
    CHECK(q.max_configurable_lossless_queues == 1);
    CHECK(q.queue_id0_service_profile == abi::QUEUE_QPORTCFG_RESP_QUEUE_ID0_SERVICE_PROFILE_LOSSY);
    CHECK(q.queue_id1_service_profile == abi::QUEUE_QPORTCFG_RESP_QUEUE_ID0_SERVICE_PROFILE_LOSSLESS_ROCE);
    CHECK(q.queue_id2_service_profile == abi::QUEUE_QPORTCFG_RESP_QUEUE_ID0_SERVICE_PROFILE_LOSSY_ROCE_CNP);
    CHECK(q.queue_id3 == 0xff);
    abi::hwrm_queue_qportcfg_input rx;
    rx.flags = abi::QUEUE_QPORTCFG_REQ_FLAGS_PATH_RX;
    CHECK(m.send(rx).error_code() == 0);
    abi::hwrm_queue_qportcfg_input bad;
    bad.flags = 0x2;
    const response r = m.send(bad);
    CHECK(r.error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
    CHECK(r.cmd_err() == static_cast<std::uint8_t>(cmd_err::bad_field));
}

TEST_CASE("bnxt model: FW_SET_TIME takes a UTC date, FUNC_CFG a cache line of 64 or 128", "[bnxt_model][vendor_driver]") {
    served_bnxt m;
    abi::hwrm_fw_set_time_input t;
    t.year = 2026;
    t.month = 12;
    t.day = 2;
    t.hour = 10;
    t.minute = 40;
    t.second = 59;
    CHECK(m.send(t).error_code() == 0);
    using mutate = void (*)(abi::hwrm_fw_set_time_input&);
    for (mutate broken : {mutate{[](abi::hwrm_fw_set_time_input& x) { x.month = 13; }},
                          mutate{[](abi::hwrm_fw_set_time_input& x) { x.day = 0; }},
                          mutate{[](abi::hwrm_fw_set_time_input& x) { x.second = 60; }},
                          mutate{[](abi::hwrm_fw_set_time_input& x) { x.zone = 60; }}}) {
        auto b = t;
        broken(b);
        CHECK(m.send(b).error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
    }
    abi::hwrm_func_cfg_input c;
    c.enables = abi::FUNC_CFG_REQ_ENABLES_CACHE_LINESIZE;
    c.options = abi::FUNC_CFG_REQ_OPTIONS_CACHE_LINESIZE_SIZE_128;
    CHECK(m.send(c).error_code() == 0);
    c.options = 2;
    CHECK(m.send(c).error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
}

TEST_CASE("bnxt model rcfw: a TLV-framed command is read by its total_size, the next one after it", "[bnxt_model][vendor_driver]") {
    roce_function r;   // initialized: MODIFY_ROCE_CC is no INVALID_CMD
    roce_channel& ch = r.ch;
    // bnxt_qplib_modify_cc's framing: struct tlv (cmd_discr 0x8000), total_size 4 slots at byte
    // 8, then a cmdq_base for MODIFY_ROCE_CC (0x8c) with its cookie; 64 bytes in all
    std::array<std::byte, 64> framed{};
    rig::abi::store_le<std::uint16_t>(framed.data(), abi::CMD_DISCR_TLV_ENCAP);
    framed[abi::roce_tlv_total_size_offset] = std::byte{4};
    framed[16] = std::byte{abi::CMDQ_BASE_OPCODE_MODIFY_ROCE_CC};
    framed[17] = std::byte{3};
    rig::abi::store_le<std::uint16_t>(framed.data() + 16 + 4, 0x0777);
    for (std::size_t i = 0; i < framed.size(); i += 16) {
        std::memcpy(ch.cmdq.host + (ch.prod % ch.slots) * 16, framed.data() + i, 16);
        ++ch.prod;
    }
    const std::uint16_t after = ch.queue(abi::cmdq_query_version{});
    ch.ring();
    const auto first = ch.next();
    REQUIRE(first.has_value());
    const auto ev = *abi::decode<abi::creq_qp_event>(*first);
    CHECK(ev.cookie == 0x0777);
    CHECK(ev.event == abi::CMDQ_BASE_OPCODE_MODIFY_ROCE_CC);
    CHECK(ev.status == abi::CREQ_QP_EVENT_STATUS_NOT_IMPLEMENTED);   // no congestion control
    const auto second = ch.next();
    REQUIRE(second.has_value());
    CHECK(abi::decode<abi::creq_qp_event>(*second)->cookie == after);
    CHECK(abi::decode<abi::creq_qp_event>(*second)->status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    CHECK_FALSE(ch.next(200ms).has_value());   // nothing replayed
}

TEST_CASE("bnxt model: --report-ledger's line after FUNC_DRV_UNRGTR and at reset", "[bnxt_model][vendor_driver]") {
    std::vector<std::string> lines;
    sim::bnxt::function_options o;
    o.function_index = 3;
    o.on_ledger = [&](const std::string& l) { lines.push_back(l); };
    served_bnxt m(o);
    context_memory cm(m);
    roce_backing_store(m, cm);
    REQUIRE(m.send(abi::hwrm_func_drv_rgtr_input{}).error_code() == 0);
    abi::hwrm_stat_ctx_alloc_input s;
    s.stats_dma_addr = m.alloc(4096).iova;
    REQUIRE(m.send(s).error_code() == 0);
    lines.clear();
    REQUIRE(m.send(abi::hwrm_func_drv_unrgtr_input{}).error_code() == 0);
    REQUIRE(m.fn.wait_idle(2s));   // the line follows the response
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].starts_with("LEDGER function=3 event=drv_unrgtr rings=0 stat_ctxs=1 vnics=0 filters=0 "
                               "roce_objects=0 context_pages="));
    CHECK(lines[0].find("context_pages=0") == std::string::npos);
    m.fn.reset();
    REQUIRE(lines.size() == 2);
    CHECK(lines[1].starts_with("LEDGER function=3 event=reset rings=0 stat_ctxs=1 "));
}
