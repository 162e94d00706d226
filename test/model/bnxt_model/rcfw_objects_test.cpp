// The bnxt model's RoCE objects (roce_hsi.h cmdq_*): CREATE_CQ, ALLOCATE_MRW + REGISTER_MR,
// CREATE_QP, MODIFY_QP through RESET->INIT->RTR->RTS, QUERY_QP's side buffer, the destroys,
// the context records in the backing store, QP_ERROR_NOTIFICATION, and the refusals: each
// leaves the objects as they were. Commands laid out as bnxt_qplib sends them (qplib_fp.c
// bnxt_qplib_create_cq / bnxt_qplib_create_qp / bnxt_qplib_modify_qp, qplib_sp.c
// bnxt_qplib_alloc_mrw / bnxt_qplib_reg_mr).
#include "roce_channel.hpp"

using namespace rig::test::bnxt;
namespace sim = rig::sim;

namespace {

abi::cmdq_modify_qp modify(std::uint32_t qp, std::uint32_t mask, std::uint8_t state) {
    abi::cmdq_modify_qp c;
    c.qp_cid = qp;
    c.modify_mask = mask | abi::CMDQ_MODIFY_QP_MODIFY_MASK_STATE;
    c.new_state = state;
    return c;
}

abi::cmdq_modify_qp to_init(std::uint32_t qp) {
    auto c = modify(qp, abi::CMDQ_MODIFY_QP_MODIFY_MASK_ACCESS | abi::CMDQ_MODIFY_QP_MODIFY_MASK_PKEY,
                    abi::CMDQ_MODIFY_QP_NEW_STATE_INIT);
    c.access = abi::CMDQ_MODIFY_QP_ACCESS_LOCAL_WRITE | abi::CMDQ_MODIFY_QP_ACCESS_REMOTE_WRITE |
               abi::CMDQ_MODIFY_QP_ACCESS_REMOTE_READ;
    c.pkey = 0xffff;
    return c;
}

// INIT->RTR as bnxt_re sends it for RoCE v2 over IPv4 (the AV, PATH_MTU, SGID_INDEX forced).
abi::cmdq_modify_qp to_rtr(std::uint32_t qp) {
    auto c = modify(qp,
                    abi::CMDQ_MODIFY_QP_MODIFY_MASK_DGID | abi::CMDQ_MODIFY_QP_MODIFY_MASK_SGID_INDEX |
                        abi::CMDQ_MODIFY_QP_MODIFY_MASK_DEST_MAC | abi::CMDQ_MODIFY_QP_MODIFY_MASK_HOP_LIMIT |
                        abi::CMDQ_MODIFY_QP_MODIFY_MASK_PATH_MTU | abi::CMDQ_MODIFY_QP_MODIFY_MASK_DEST_QP_ID |
                        abi::CMDQ_MODIFY_QP_MODIFY_MASK_RQ_PSN | abi::CMDQ_MODIFY_QP_MODIFY_MASK_MAX_DEST_RD_ATOMIC |
                        abi::CMDQ_MODIFY_QP_MODIFY_MASK_MIN_RNR_TIMER,
                    abi::CMDQ_MODIFY_QP_NEW_STATE_RTR);
    c.network_type = abi::CMDQ_MODIFY_QP_NETWORK_TYPE_ROCEV2_IPV4;
    c.dgid = peer_gid;
    c.sgid_index = 0;
    c.dest_mac = {0x02, 0x52, 0x49, 0x47, 0x50, 0x01};
    c.hop_limit = 64;
    c.path_mtu = abi::CMDQ_MODIFY_QP_PATH_MTU_MTU_4096;
    c.dest_qp_id = 0x12;
    c.rq_psn = 0x1000;
    c.max_dest_rd_atomic = 34;   // IRRQ slots for 16 reads (IRD_LIMIT_TO_IRRQ_SLOTS)
    c.min_rnr_timer = 12;
    return c;
}

abi::cmdq_modify_qp to_rts(std::uint32_t qp) {
    auto c = modify(qp,
                    abi::CMDQ_MODIFY_QP_MODIFY_MASK_TIMEOUT | abi::CMDQ_MODIFY_QP_MODIFY_MASK_RETRY_CNT |
                        abi::CMDQ_MODIFY_QP_MODIFY_MASK_RNR_RETRY | abi::CMDQ_MODIFY_QP_MODIFY_MASK_SQ_PSN |
                        abi::CMDQ_MODIFY_QP_MODIFY_MASK_MAX_RD_ATOMIC,
                    abi::CMDQ_MODIFY_QP_NEW_STATE_RTS);
    c.timeout = 14;
    c.retry_cnt = 7;
    c.rnr_retry = 7;
    c.sq_psn = 0x2000;
    c.max_rd_atomic = 17;        // ORRQ slots for 16 reads (ORD_LIMIT_TO_ORRQ_SLOTS)
    return c;
}

std::uint8_t qp_state(served_bnxt& m, std::uint32_t qp) {
    return m.fn.with_firmware([&](const sim::bnxt::firmware& f) { return f.rcfw().qps.at(qp).state; });
}

}  // namespace

TEST_CASE("bnxt model rcfw objects: a CQ, an MR and an RC QP made, taken to RTS, queried, destroyed",
          "[bnxt_model][rcfw][objects]") {
    roce_function r;
    const auto [cq_status, cq] = r.run(r.cq(128, 0x1111));
    REQUIRE(cq_status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    CHECK(cq >= r.m.fn.with_firmware([](const sim::bnxt::firmware& f) { return f.options().cq_max_l2_entries; }));
    // the CQ's context record: kind, the id, the handle
    const auto rec = r.record("CQ", cq);
    CHECK(rec[0] == std::byte{'C'});
    CHECK(rig::abi::load_le<std::uint32_t>(rec.data() + 4) == cq);
    CHECK(rig::abi::load_le<std::uint64_t>(rec.data() + 8) == 0x1111);

    // an MR: ALLOCATE_MRW then REGISTER_MR of two pages through a level-1 page list
    abi::cmdq_allocate_mrw alloc;
    alloc.mrw_handle = 0x2222;
    alloc.mrw_flags = abi::CMDQ_ALLOCATE_MRW_MRW_FLAGS_MR;
    alloc.pd_id = 1;
    const auto [key_status, key] = r.run(alloc);
    REQUIRE(key_status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    CHECK(key == 1);
    const auto [mr_pages, mr_pbl] = r.paged(2);
    abi::cmdq_register_mr reg;
    reg.key = key;
    reg.lvl = 1;
    reg.log2_pg_size = 12;
    reg.log2_pbl_pg_size = 12;
    reg.access = abi::CMDQ_REGISTER_MR_ACCESS_LOCAL_WRITE | abi::CMDQ_REGISTER_MR_ACCESS_REMOTE_WRITE;
    reg.pbl = mr_pbl;
    reg.va = 0x7f0000000000;
    reg.mr_size = 8192;
    CHECK(r.run(reg) == std::pair<std::uint8_t, std::uint32_t>{abi::CREQ_QP_EVENT_STATUS_SUCCESS, key});
    r.m.fn.with_firmware([&](const sim::bnxt::firmware& f) {
        const auto& k = f.rcfw().keys.at(key);
        CHECK(k.registered);
        CHECK(k.memory.pages == std::vector<std::uint64_t>{mr_pages.iova, mr_pages.iova + 4096});
        CHECK(k.va == 0x7f0000000000);
    });

    // an RC QP on the CQ: id 2 (1 is the GSI QP's), RESET
    const auto [qp_status, qp] = r.run(r.rc_qp(cq, cq));
    REQUIRE(qp_status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    CHECK(qp == 2);
    CHECK(qp_state(r.m, qp) == abi::CMDQ_MODIFY_QP_NEW_STATE_RESET);
    r.m.fn.with_firmware([&](const sim::bnxt::firmware& f) {
        CHECK(f.rcfw().qps.at(qp).sq.pages.size() == 3);
        CHECK(f.rcfw().cqs.at(cq).queue_pairs == 2);   // its send and its receive CQ
    });

    REQUIRE(r.run(to_init(qp)).first == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    REQUIRE(r.run(to_rtr(qp)).first == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    REQUIRE(r.run(to_rts(qp)).first == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    CHECK(qp_state(r.m, qp) == abi::CMDQ_MODIFY_QP_NEW_STATE_RTS);

    // QUERY_QP: the attributes back through the side buffer
    const auto sb = r.m.alloc(4096);
    abi::cmdq_query_qp q;
    q.qp_cid = qp;
    q.resp_addr = sb.iova;
    REQUIRE(r.run(q).first == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    const auto got = *abi::decode<abi::creq_query_qp_resp_sb>(std::span<const std::byte>(sb.host, 104));
    CHECK(got.xid == qp);
    CHECK(got.state == abi::CMDQ_MODIFY_QP_NEW_STATE_RTS);
    CHECK(got.dgid == peer_gid);
    CHECK(got.dest_qp_id == 0x12);
    CHECK(got.path_mtu == abi::CMDQ_MODIFY_QP_PATH_MTU_MTU_4096);
    CHECK(got.rq_psn == 0x1000);
    CHECK(got.sq_psn == 0x2000);
    CHECK(got.timeout == 14);
    CHECK(got.retry_cnt == 7);
    CHECK(got.rnr_retry == 7);
    CHECK(got.min_rnr_timer == 12);
    CHECK(got.max_rd_atomic == 17);
    CHECK(got.max_dest_rd_atomic == 34);
    CHECK(got.access == 0x7);
    CHECK(got.sq_size == 64);

    // a CQ a QP names stays; the QP goes, then the CQ; their entries back to the initializer
    abi::cmdq_destroy_cq dcq;
    dcq.cq_cid = cq;
    CHECK(r.run(dcq).first == abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
    abi::cmdq_destroy_qp dqp;
    dqp.qp_cid = qp;
    CHECK(r.run(dqp) == std::pair<std::uint8_t, std::uint32_t>{abi::CREQ_QP_EVENT_STATUS_SUCCESS, qp});
    CHECK(r.run(dqp).first == abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
    CHECK(r.run(dcq) == std::pair<std::uint8_t, std::uint32_t>{abi::CREQ_QP_EVENT_STATUS_SUCCESS, cq});
    CHECK(r.record("CQ", cq)[0] == std::byte{0xff});

    // the key: DEALLOCATE_KEY naming another kind refused; then freed, registered as it is
    abi::cmdq_deallocate_key free_key;
    free_key.key = key;
    free_key.mrw_flags = abi::CMDQ_ALLOCATE_MRW_MRW_FLAGS_PMR;
    CHECK(r.run(free_key).first == abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
    free_key.mrw_flags = abi::CMDQ_ALLOCATE_MRW_MRW_FLAGS_MR;
    CHECK(r.run(free_key).first == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    r.m.fn.with_firmware([](const sim::bnxt::firmware& f) {
        CHECK(f.rcfw().keys.empty());
        CHECK(f.rcfw().qps.empty());
        CHECK(f.rcfw().cqs.empty());
        CHECK(f.context_violations().empty());
    });
}

TEST_CASE("bnxt model rcfw objects: MODIFY_QP's state machine refuses and leaves the QP as it was",
          "[bnxt_model][rcfw][objects]") {
    roce_function r;
    const std::uint32_t cq = r.run(r.cq(64, 1)).second;
    const auto [status, qp] = r.run(r.rc_qp(cq, cq));
    REQUIRE(status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    auto refused = [&](const abi::cmdq_modify_qp& c, std::uint8_t state_after, std::string_view why) {
        CHECK(r.run(c).first == abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
        CHECK(qp_state(r.m, qp) == state_after);
        r.m.fn.with_firmware([&](const sim::bnxt::firmware& f) {
            INFO(f.rcfw().last_error);
            CHECK(f.rcfw().last_error.find(why) != std::string::npos);
        });
    };
    const std::uint8_t reset = abi::CMDQ_MODIFY_QP_NEW_STATE_RESET, init = abi::CMDQ_MODIFY_QP_NEW_STATE_INIT,
                       rtr = abi::CMDQ_MODIFY_QP_NEW_STATE_RTR;
    refused(to_rtr(qp), reset, "RESET->RTR is no transition");
    refused(modify(qp, 0, abi::CMDQ_MODIFY_QP_NEW_STATE_ERR), reset, "RESET->ERR");
    auto no_pkey = to_init(qp);
    no_pkey.modify_mask &= ~abi::CMDQ_MODIFY_QP_MODIFY_MASK_PKEY;
    refused(no_pkey, reset, "needs modify_mask bits 0x8");
    auto other_pkey = to_init(qp);
    other_pkey.pkey = 0x7fff;
    refused(other_pkey, reset, "pkey 0x7fff");
    REQUIRE(r.run(to_init(qp)).first == abi::CREQ_QP_EVENT_STATUS_SUCCESS);

    auto no_dest = to_rtr(qp);
    no_dest.modify_mask &= ~abi::CMDQ_MODIFY_QP_MODIFY_MASK_DEST_QP_ID;
    refused(no_dest, init, "needs modify_mask bits 0x4000000");
    auto src_mac = to_rtr(qp);
    src_mac.modify_mask |= abi::CMDQ_MODIFY_QP_MODIFY_MASK_SRC_MAC;
    refused(src_mac, init, "takes no modify_mask bits 0x8000000");
    auto unknown_gid = to_rtr(qp);
    unknown_gid.sgid_index = 3;
    refused(unknown_gid, init, "sgid_index 3 names no GID");
    auto big_mtu = to_rtr(qp);
    big_mtu.path_mtu = 5;
    refused(big_mtu, init, "path_mtu 5");
    auto no_irrq = to_rtr(qp);
    no_irrq.max_dest_rd_atomic = 0;   // the Bono firmware wants at least one
    refused(no_irrq, init, "max_dest_rd_atomic 0");
    REQUIRE(r.run(to_rtr(qp)).first == abi::CREQ_QP_EVENT_STATUS_SUCCESS);

    auto rts_with_dgid = to_rts(qp);   // what __modify_flags_from_rtr_state strips
    rts_with_dgid.modify_mask |= abi::CMDQ_MODIFY_QP_MODIFY_MASK_DGID;
    refused(rts_with_dgid, rtr, "takes no modify_mask bits 0x20");
    auto long_timeout = to_rts(qp);
    long_timeout.timeout = 32;
    refused(long_timeout, rtr, "timeout 32");
    auto qkey_on_rc = to_rts(qp);
    qkey_on_rc.modify_mask |= abi::CMDQ_MODIFY_QP_MODIFY_MASK_QKEY;
    refused(qkey_on_rc, rtr, "takes no modify_mask bits 0x10");
    // nothing of the refused commands stuck
    r.m.fn.with_firmware([&](const sim::bnxt::firmware& f) {
        const auto& a = f.rcfw().qps.at(qp).attributes;
        CHECK(a.timeout == 0);
        CHECK(a.dest_qp_id == 0x12);
        CHECK(a.path_mtu == abi::CMDQ_MODIFY_QP_PATH_MTU_MTU_4096);
    });
    REQUIRE(r.run(to_rts(qp)).first == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    // RTS->RTS without STATE in the mask, then to ERR and to RESET, which forgets the path
    auto rnr = to_rts(qp);
    rnr.modify_mask = abi::CMDQ_MODIFY_QP_MODIFY_MASK_MIN_RNR_TIMER;
    rnr.min_rnr_timer = 3;
    CHECK(r.run(rnr).first == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    CHECK(qp_state(r.m, qp) == abi::CMDQ_MODIFY_QP_NEW_STATE_RTS);
    CHECK(r.run(modify(qp, 0, abi::CMDQ_MODIFY_QP_NEW_STATE_ERR)).first == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    refused(to_rts(qp), abi::CMDQ_MODIFY_QP_NEW_STATE_ERR, "ERR->RTS");
    CHECK(r.run(modify(qp, 0, reset)).first == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    r.m.fn.with_firmware([&](const sim::bnxt::firmware& f) {
        CHECK(f.rcfw().qps.at(qp).attributes.dest_qp_id == 0);
    });
    refused(modify(qp + 5, 0, init), reset, "names no queue pair");
}

TEST_CASE("bnxt model rcfw objects: bad CQ, key and QP commands are refused, naming what was wrong",
          "[bnxt_model][rcfw][objects]") {
    roce_function r;
    auto refused = [&](const auto& c, std::uint8_t status, std::string_view why) {
        CHECK(r.run(c).first == status);
        r.m.fn.with_firmware([&](const sim::bnxt::firmware& f) {
            INFO(f.rcfw().last_error);
            CHECK(f.rcfw().last_error.find(why) != std::string::npos);
        });
    };
    constexpr auto invalid = abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER;
    auto no_nq = r.cq(64, 1);
    no_nq.cnq_id = 0x7ff;
    refused(no_nq, invalid, "cnq_id 0x7ff is no NQ ring");
    auto empty = r.cq(64, 1);
    empty.cq_size = 0;
    refused(empty, invalid, "cq_size 0");
    auto invalid_pte = r.cq(64, 1);
    invalid_pte.lvl = 1;
    invalid_pte.pbl = r.m.alloc(4096).iova;   // a page of PTEs without PTU_PTE_VALID
    refused(invalid_pte, invalid, "the CQ's pages");
    const std::uint32_t cq = r.run(r.cq(64, 1)).second;

    auto no_cq = r.rc_qp(cq, cq + 1);
    refused(no_cq, invalid, "names no CQ");
    auto srq = r.rc_qp(cq, cq);
    srq.qp_flags = abi::CMDQ_CREATE_QP_QP_FLAGS_SRQ_USED;
    refused(srq, invalid, "SRQs");
    auto no_orrq = r.rc_qp(cq, cq);
    no_orrq.orrq_addr = 0;
    refused(no_orrq, invalid, "without IRRQ and ORRQ");
    auto seven_sge = r.rc_qp(cq, cq);
    seven_sge.sq_sge = 7;
    refused(seven_sge, invalid, "sq_sge 7");
    auto short_sq = r.rc_qp(cq, cq);
    short_sq.sq_lvl = 0;   // one page where 9216 bytes need three: the PTE page read as data
    short_sq.sq_pbl = r.m.alloc(4096).iova;
    refused(short_sq, invalid, "the send queue's pages");
    // the GSI QP is id 1, once
    auto gsi = r.rc_qp(cq, cq);
    gsi.type = abi::CMDQ_CREATE_QP_TYPE_GSI;
    CHECK(r.run(gsi) == std::pair<std::uint8_t, std::uint32_t>{abi::CREQ_QP_EVENT_STATUS_SUCCESS, 1});
    refused(gsi, abi::CREQ_QP_EVENT_STATUS_RESOURCES, "the GSI queue pair exists");

    abi::cmdq_register_mr reg;
    reg.key = 9;
    refused(reg, invalid, "names no MR or PMR key");
    abi::cmdq_allocate_mrw mw;
    mw.mrw_flags = abi::CMDQ_ALLOCATE_MRW_MRW_FLAGS_MW_TYPE1;
    const std::uint32_t window = r.run(mw).second;
    reg.key = window;
    refused(reg, invalid, "names no MR or PMR key");
    abi::cmdq_deregister_mr dereg;
    dereg.lkey = window;
    refused(dereg, invalid, "names no registered MR");
    mw.mrw_flags = 9;
    refused(mw, invalid, "mrw_flags 9");
    // nothing the refusals touched was made
    r.m.fn.with_firmware([&](const sim::bnxt::firmware& f) {
        CHECK(f.rcfw().cqs.size() == 1);
        CHECK(f.rcfw().qps.size() == 1);
        CHECK(f.rcfw().keys.size() == 1);
    });
}

TEST_CASE("bnxt model rcfw objects: the DMA MR, keys running out, DEINITIALIZE_FW and reset drop all",
          "[bnxt_model][rcfw][objects]") {
    sim::bnxt::function_options fo;
    fo.firmware.mrav_max_entries = 4;   // MRAV entries 0..3: keys 1..3
    roce_function r(fo);
    abi::cmdq_allocate_mrw pmr;
    pmr.mrw_flags = abi::CMDQ_ALLOCATE_MRW_MRW_FLAGS_PMR;
    const std::uint32_t key = r.run(pmr).second;
    // bnxt_re_get_dma_mr: pbl 0, level 0, every byte (mr_size all ones)
    abi::cmdq_register_mr dma_mr;
    dma_mr.key = key;
    dma_mr.access = abi::CMDQ_REGISTER_MR_ACCESS_LOCAL_WRITE;
    dma_mr.log2_pg_size = 12;
    dma_mr.mr_size = ~std::uint64_t{0};
    CHECK(r.run(dma_mr).first == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    auto remote_only = dma_mr;
    remote_only.access = abi::CMDQ_REGISTER_MR_ACCESS_REMOTE_WRITE;
    CHECK(r.run(remote_only).first == abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
    CHECK(r.run(pmr).second == key + 1);
    CHECK(r.run(pmr).second == key + 2);
    CHECK(r.run(pmr).first == abi::CREQ_QP_EVENT_STATUS_RESOURCES);

    const std::uint32_t cq = r.run(r.cq(64, 1)).second;
    const std::uint32_t qp = r.run(r.rc_qp(cq, cq)).second;
    // the NIC's own word: QP_ERROR_NOTIFICATION on the CREQ, the QP in ERR
    REQUIRE(r.m.fn.qp_error(qp, abi::CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_TIMEOUT_RETRY_LIMIT, 0, 5, 0));
    const auto e = r.ch.next();
    REQUIRE(e.has_value());
    const auto n = *abi::decode<abi::creq_qp_error_notification>(*e);
    CHECK(n.event == abi::CREQ_QP_EVENT_EVENT_QP_ERROR_NOTIFICATION);
    CHECK(n.xid == qp);
    CHECK(n.req_err_state_reason == abi::CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_TIMEOUT_RETRY_LIMIT);
    CHECK(n.sq_cons_idx == 5);
    CHECK(r.ch.interrupts(1) >= 1);
    CHECK(qp_state(r.m, qp) == abi::CMDQ_MODIFY_QP_NEW_STATE_ERR);
    CHECK_FALSE(r.m.fn.qp_error(qp + 1, 1, 0, 0, 0));

    CHECK(r.run(abi::cmdq_deinitialize_fw{}).first == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    r.m.fn.with_firmware([](const sim::bnxt::firmware& f) {
        CHECK(f.rcfw().keys.empty());
        CHECK(f.rcfw().qps.empty());
        CHECK(f.rcfw().cqs.empty());
    });
    CHECK(r.run(r.cq(64, 1)).first == abi::CREQ_QP_EVENT_STATUS_INVALID_CMD);
}

TEST_CASE("bnxt model rcfw objects: context memory the driver took away is a violation, the command fails",
          "[bnxt_model][rcfw][objects]") {
    roce_function r;
    REQUIRE(r.m.f->dma_unmap(r.cm.iova, r.cm.bytes).has_value());
    CHECK(r.run(r.cq(64, 1)).first == abi::CREQ_QP_EVENT_STATUS_HARDWARE_ERROR);
    r.m.fn.with_firmware([](const sim::bnxt::firmware& f) {
        CHECK(f.rcfw().cqs.empty());
        const auto v = f.context_violations();
        REQUIRE_FALSE(v.empty());
        CHECK(v.back().what.find("CQ context entry") != std::string::npos);
    });
}

// ib_mad brings QP1 up RESET->INIT (P_Key, Q_Key), INIT->RTR, RTR->RTS (SQ PSN); bnxt_re adds
// SGID_INDEX and PATH_MTU to every INIT->RTR (qplib_fp.c __modify_flags_from_init_state), and the
// Bono firmware takes them on a GSI QP: Linux's bnxt_re showed it in the guest suite.
TEST_CASE("bnxt model rcfw objects: QP1 through RTS as bnxt_re and ib_mad take it", "[bnxt_model][rcfw][objects]") {
    roce_function r;
    const std::uint32_t cq = r.run(r.cq(64, 1)).second;
    auto gsi = r.rc_qp(cq, cq);
    gsi.type = abi::CMDQ_CREATE_QP_TYPE_GSI;
    REQUIRE(r.run(gsi) == std::pair<std::uint8_t, std::uint32_t>{abi::CREQ_QP_EVENT_STATUS_SUCCESS, 1});
    auto init = modify(1, abi::CMDQ_MODIFY_QP_MODIFY_MASK_PKEY | abi::CMDQ_MODIFY_QP_MODIFY_MASK_QKEY,
                       abi::CMDQ_MODIFY_QP_NEW_STATE_INIT);
    init.pkey = 0xffff;
    init.qkey = 0x80010000;   // IB_QP1_QKEY
    CHECK(r.run(init).first == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    auto rtr = modify(1, abi::CMDQ_MODIFY_QP_MODIFY_MASK_SGID_INDEX | abi::CMDQ_MODIFY_QP_MODIFY_MASK_PATH_MTU,
                      abi::CMDQ_MODIFY_QP_NEW_STATE_RTR);
    rtr.path_mtu = abi::CMDQ_MODIFY_QP_PATH_MTU_MTU_2048;
    CHECK(r.run(rtr).first == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    auto with_dgid = modify(1, abi::CMDQ_MODIFY_QP_MODIFY_MASK_DGID, abi::CMDQ_MODIFY_QP_NEW_STATE_RTS);
    with_dgid.modify_mask |= abi::CMDQ_MODIFY_QP_MODIFY_MASK_SQ_PSN;
    CHECK(r.run(with_dgid).first == abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);   // a UD QP has no path
    CHECK(r.run(modify(1, abi::CMDQ_MODIFY_QP_MODIFY_MASK_SQ_PSN, abi::CMDQ_MODIFY_QP_NEW_STATE_RTS)).first ==
          abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    r.m.fn.with_firmware([](const sim::bnxt::firmware& f) {
        CHECK(f.rcfw().qps.at(1).state == abi::CMDQ_MODIFY_QP_NEW_STATE_RTS);
        CHECK(f.rcfw().qps.at(1).attributes.qkey == 0x80010000);
    });
}
