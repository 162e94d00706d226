// The bnxt model's HWRM commands, each answer's fields and each refusal's error code and
// cmd_err (bnxt_hsi.h; as bnxt_en's bnxt.c sends them), driven by raw BAR0 writes over vfio-user.
#include "hwrm_client.hpp"

using namespace rig::test::bnxt;
namespace sim = rig::sim;
using sim::bnxt::cmd_err;

namespace {

std::uint8_t err(cmd_err e) { return static_cast<std::uint8_t>(e); }

// A ring of `entries` 16-byte entries: depth 0 (one contiguous area) or 1 (a PTE page).
abi::hwrm_ring_alloc_input ring_request(served_bnxt& m, std::uint8_t type, std::uint32_t entries,
                                        std::uint8_t depth, std::uint16_t logical_id = 0) {
    abi::hwrm_ring_alloc_input r;
    r.ring_type = type;
    r.length = entries;
    r.logical_id = logical_id;
    r.int_mode = abi::RING_ALLOC_REQ_INT_MODE_MSIX;
    const std::size_t bytes = std::size_t{entries} * 16;
    const auto ring = m.alloc(bytes);
    if (depth == 0) {
        r.page_size = 4;   // as bnxt_re writes it for a one-page ring
        r.page_tbl_addr = ring.iova;
        return r;
    }
    const auto ptes = m.alloc(4096);
    for (std::size_t p = 0; p < (bytes + 4095) / 4096; ++p) {
        rig::abi::store_le<std::uint64_t>(ptes.host + 8 * p, (ring.iova + 4096 * p) | 0x1);
    }
    r.page_size = 12;
    r.page_tbl_depth = 1;
    r.page_tbl_addr = ptes.iova;
    return r;
}

std::uint16_t alloc_ring(served_bnxt& m, const abi::hwrm_ring_alloc_input& r) {
    const response a = m.send(r);
    REQUIRE(a.arrived());
    REQUIRE(a.error_code() == 0);
    return a.as<abi::hwrm_ring_alloc_output>().ring_id;
}

}  // namespace

TEST_CASE("bnxt model: FUNC_QCAPS, FUNC_QCFG, FUNC_RESOURCE_QCAPS, PORT_PHY_QCFG", "[bnxt_model]") {
    served_bnxt m;
    const auto caps = m.send(abi::hwrm_func_qcaps_input{}).as<abi::hwrm_func_qcaps_output>();
    CHECK((caps.flags & abi::FUNC_QCAPS_RESP_FLAGS_ROCE_V2_SUPPORTED) != 0);
    CHECK((caps.flags_ext & abi::FUNC_QCAPS_RESP_FLAGS_EXT_BS_V2_SUPPORTED) == 0);
    CHECK(caps.mac_address == std::array<std::uint8_t, 6>{0x02, 0x52, 0x49, 0x47, 0x50, 0x00});
    CHECK(caps.max_cmpl_rings == 128);
    CHECK(caps.max_stat_ctx == 256);
    CHECK(caps.max_vnics == 64);
    abi::hwrm_func_qcaps_input other;
    other.fid = 5;
    const response bad = m.send(other);
    CHECK(bad.error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
    CHECK(bad.cmd_err() == err(cmd_err::unknown_object));

    const auto cfg = m.send(abi::hwrm_func_qcfg_input{}).as<abi::hwrm_func_qcfg_output>();
    CHECK(cfg.l2_doorbell_bar_size_kb == 128);
    CHECK(cfg.legacy_l2_db_size_kb == 64);   // db_offset 0x10000
    CHECK(cfg.db_page_size == 0);
    CHECK(cfg.mac_address == caps.mac_address);
    CHECK(cfg.admin_mtu == 9000);

    const auto res = m.send(abi::hwrm_func_resource_qcaps_input{}).as<abi::hwrm_func_resource_qcaps_output>();
    CHECK(res.max_msix == 64);
    CHECK(res.max_tx_rings == 128);
    CHECK(res.max_stat_ctx == 256);

    const auto phy = m.send(abi::hwrm_port_phy_qcfg_input{}).as<abi::hwrm_port_phy_qcfg_output>();
    CHECK(phy.link == abi::PORT_PHY_QCFG_RESP_LINK_LINK);
    CHECK(phy.link_speed == abi::PORT_PHY_QCFG_RESP_LINK_SPEED_100GB);
    CHECK(phy.duplex_state == abi::PORT_PHY_QCFG_RESP_DUPLEX_STATE_FULL);
    CHECK(phy.active_lanes == 4);
    abi::hwrm_port_phy_qcfg_input p1;
    p1.port_id = 1;
    CHECK(m.send(p1).error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
}

TEST_CASE("bnxt model: FUNC_DRV_RGTR / UNRGTR", "[bnxt_model]") {
    served_bnxt m;
    abi::hwrm_func_drv_rgtr_input r;
    r.enables = abi::FUNC_DRV_RGTR_REQ_ENABLES_OS_TYPE | abi::FUNC_DRV_RGTR_REQ_ENABLES_VER |
                abi::FUNC_DRV_RGTR_REQ_ENABLES_ASYNC_EVENT_FWD;
    r.os_type = abi::FUNC_DRV_RGTR_REQ_OS_TYPE_LINUX;
    r.async_event_fwd[0] = 0x01;   // LINK_STATUS_CHANGE
    r.async_event_fwd[4] = 0x01;   // event 32
    CHECK(m.send(r).error_code() == 0);
    m.fn.with_firmware([](const sim::bnxt::firmware& f) {
        CHECK(f.registered());
        CHECK(f.async_event_fwd()[0] == 1);
        CHECK(f.async_event_fwd()[1] == 1);
    });
    r.enables = 0x40;
    const response bad = m.send(r);
    CHECK(bad.error_code() == abi::HWRM_ERR_CODE_INVALID_ENABLES);
    CHECK(bad.cmd_err() == err(cmd_err::unknown_enables));
    CHECK(m.send(abi::hwrm_func_drv_unrgtr_input{}).error_code() == 0);
    m.fn.with_firmware([](const sim::bnxt::firmware& f) { CHECK_FALSE(f.registered()); });
}

TEST_CASE("bnxt model: FUNC_CFG reservations", "[bnxt_model]") {
    served_bnxt m;
    abi::hwrm_func_cfg_input c;
    c.enables = abi::FUNC_CFG_REQ_ENABLES_NUM_MSIX | abi::FUNC_CFG_REQ_ENABLES_NUM_STAT_CTXS;
    c.num_msix = 65;
    c.num_stat_ctxs = 2;
    const response over = m.send(c);
    CHECK(over.error_code() == abi::HWRM_ERR_CODE_RESOURCE_ALLOC_ERROR);
    CHECK(over.cmd_err() == err(cmd_err::no_resources));
    c.num_msix = 2;
    CHECK(m.send(c).error_code() == 0);
    const auto q = m.send(abi::hwrm_func_qcfg_input{}).as<abi::hwrm_func_qcfg_output>();
    CHECK(q.alloc_msix == 2);
    CHECK(q.alloc_stat_ctx == 2);
    // the reservation holds: a third NQ is refused
    alloc_ring(m, ring_request(m, abi::RING_ALLOC_REQ_RING_TYPE_NQ, 256, 0, 0));
    alloc_ring(m, ring_request(m, abi::RING_ALLOC_REQ_RING_TYPE_NQ, 256, 0, 1));
    const response third = m.send(ring_request(m, abi::RING_ALLOC_REQ_RING_TYPE_NQ, 256, 0, 2));
    CHECK(third.error_code() == abi::HWRM_ERR_CODE_RESOURCE_ALLOC_ERROR);
    CHECK(third.cmd_err() == err(cmd_err::no_resources));
    // below what is in use, refused; an enables bit the model lacks, refused
    c.num_msix = 1;
    CHECK(m.send(c).error_code() == abi::HWRM_ERR_CODE_RESOURCE_ALLOC_ERROR);
    c.enables = 0x1000000;
    const response unk = m.send(c);
    CHECK(unk.error_code() == abi::HWRM_ERR_CODE_INVALID_ENABLES);
    CHECK(unk.cmd_err() == err(cmd_err::unknown_enables));
}

TEST_CASE("bnxt model: RING_ALLOC / RING_FREE of NQs (the CREQ and RoCE NQs)", "[bnxt_model]") {
    served_bnxt m;
    const std::uint16_t creq = alloc_ring(m, ring_request(m, abi::RING_ALLOC_REQ_RING_TYPE_NQ, 4096, 1, 1));
    const std::uint16_t nq = alloc_ring(m, ring_request(m, abi::RING_ALLOC_REQ_RING_TYPE_NQ, 256, 0, 2));
    CHECK(creq == 0);
    CHECK(nq == 1);
    m.fn.with_firmware([&](const sim::bnxt::firmware& f) {
        const auto& r = f.rings().at(creq);
        CHECK(r.pages.size() == 16);
        CHECK(r.length == 4096);
        CHECK(r.logical_id == 1);
        CHECK(r.entry_address(256).value() == r.pages[1]);
    });
    SECTION("refusals") {
        auto bad = [&](abi::hwrm_ring_alloc_input r, cmd_err e) {
            const response a = m.send(r);
            REQUIRE(a.arrived());
            CHECK(a.error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
            CHECK(a.cmd_err() == err(e));
        };
        auto r = ring_request(m, abi::RING_ALLOC_REQ_RING_TYPE_ROCE_CMPL, 256, 0);
        bad(r, cmd_err::bad_field);   // the P4 ring type
        r = ring_request(m, abi::RING_ALLOC_REQ_RING_TYPE_NQ, 300, 0);
        bad(r, cmd_err::bad_field);   // not a power of two
        r = ring_request(m, abi::RING_ALLOC_REQ_RING_TYPE_NQ, 256, 0, 64);
        bad(r, cmd_err::bad_field);   // past the 64 MSI-X vectors
        r = ring_request(m, abi::RING_ALLOC_REQ_RING_TYPE_NQ, 1024, 1);
        rig::abi::store_le<std::uint64_t>(m.mem.data() + (r.page_tbl_addr - m.iova) + 8, 0x5000);   // PTE 1 not valid
        bad(r, cmd_err::bad_page_table);
        r = ring_request(m, abi::RING_ALLOC_REQ_RING_TYPE_NQ, 1024, 1);
        r.page_tbl_addr = m.iova + (1ull << 30);   // an unmapped page table
        bad(r, cmd_err::bad_page_table);
        r = ring_request(m, abi::RING_ALLOC_REQ_RING_TYPE_L2_CMPL, 256, 0);
        r.enables = abi::RING_ALLOC_REQ_ENABLES_NQ_RING_ID_VALID;
        r.nq_ring_id = 77;
        bad(r, cmd_err::unknown_object);
        r = ring_request(m, abi::RING_ALLOC_REQ_RING_TYPE_NQ, 256, 0);
        r.int_mode = abi::RING_ALLOC_REQ_INT_MODE_LEGACY;
        bad(r, cmd_err::bad_field);
    }
    SECTION("free") {
        abi::hwrm_ring_free_input f;
        f.ring_type = abi::RING_ALLOC_REQ_RING_TYPE_NQ;
        f.ring_id = creq;
        CHECK(m.send(f).error_code() == 0);
        const response again = m.send(f);
        CHECK(again.error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
        CHECK(again.cmd_err() == err(cmd_err::unknown_object));
        f.ring_id = nq;
        f.ring_type = abi::RING_ALLOC_REQ_RING_TYPE_TX;   // the wrong type
        CHECK(m.send(f).error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
        CHECK(m.fn.rings() == 1);
        // the lowest free id is handed out again
        CHECK(alloc_ring(m, ring_request(m, abi::RING_ALLOC_REQ_RING_TYPE_NQ, 256, 0)) == creq);
    }
}

TEST_CASE("bnxt model: stat contexts, VNIC in a RoCE mode, the TRAFFIC_ROCE filter", "[bnxt_model]") {
    served_bnxt m;
    abi::hwrm_stat_ctx_alloc_input s;
    s.stats_dma_addr = m.alloc(4096).iova;
    s.update_period_ms = 1000;
    s.stat_ctx_flags = abi::STAT_CTX_ALLOC_REQ_STAT_CTX_FLAGS_ROCE;
    const response sa = m.send(s);
    REQUIRE(sa.error_code() == 0);
    const std::uint32_t sid = sa.as<abi::hwrm_stat_ctx_alloc_output>().stat_ctx_id;
    m.fn.with_firmware([&](const sim::bnxt::firmware& f) { CHECK(f.stat_ctxs().at(sid).roce); });
    abi::hwrm_stat_ctx_free_input sf;
    sf.stat_ctx_id = 99;
    CHECK(m.send(sf).error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);

    // the L2 rings a RoCE receive path names (docs/hardware.md)
    const std::uint16_t nq = alloc_ring(m, ring_request(m, abi::RING_ALLOC_REQ_RING_TYPE_NQ, 256, 0));
    auto cq = ring_request(m, abi::RING_ALLOC_REQ_RING_TYPE_L2_CMPL, 256, 0);
    cq.enables = abi::RING_ALLOC_REQ_ENABLES_NQ_RING_ID_VALID;
    cq.nq_ring_id = nq;
    const std::uint16_t cmpl = alloc_ring(m, cq);
    auto rx = ring_request(m, abi::RING_ALLOC_REQ_RING_TYPE_RX, 256, 0);
    rx.cmpl_ring_id = cmpl;
    const std::uint16_t rxr = alloc_ring(m, rx);
    // an NQ still named by a completion ring is not freed
    abi::hwrm_ring_free_input busy;
    busy.ring_type = abi::RING_ALLOC_REQ_RING_TYPE_NQ;
    busy.ring_id = nq;
    CHECK(m.send(busy).cmd_err() == err(cmd_err::in_use));

    const response va = m.send(abi::hwrm_vnic_alloc_input{});
    REQUIRE(va.error_code() == 0);
    const auto vid = static_cast<std::uint16_t>(va.as<abi::hwrm_vnic_alloc_output>().vnic_id);
    abi::hwrm_vnic_cfg_input vc;
    vc.vnic_id = vid;
    vc.flags = abi::VNIC_CFG_REQ_FLAGS_ROCE_DUAL_VNIC_MODE | abi::VNIC_CFG_REQ_FLAGS_ROCE_ONLY_VNIC_MODE;
    const response both = m.send(vc);
    CHECK(both.error_code() == abi::HWRM_ERR_CODE_INVALID_FLAGS);
    vc.flags = abi::VNIC_CFG_REQ_FLAGS_DEFAULT | abi::VNIC_CFG_REQ_FLAGS_ROCE_DUAL_VNIC_MODE;
    vc.enables = abi::VNIC_CFG_REQ_ENABLES_DEFAULT_RX_RING_ID | abi::VNIC_CFG_REQ_ENABLES_DEFAULT_CMPL_RING_ID |
                 abi::VNIC_CFG_REQ_ENABLES_MRU;
    vc.default_rx_ring_id = cmpl;   // a completion ring is no RX ring
    vc.default_cmpl_ring_id = cmpl;
    vc.mru = 9000;
    CHECK(m.send(vc).cmd_err() == err(cmd_err::unknown_object));
    vc.default_rx_ring_id = rxr;
    CHECK(m.send(vc).error_code() == 0);
    vc.enables = 0x1;   // DFLT_RING_GRP: P4
    CHECK(m.send(vc).error_code() == abi::HWRM_ERR_CODE_INVALID_ENABLES);
    CHECK_FALSE(m.fn.roce_receive_ready());

    abi::hwrm_cfa_l2_filter_alloc_input fa;
    fa.flags = abi::CFA_L2_FILTER_ALLOC_REQ_FLAGS_PATH_RX | abi::CFA_L2_FILTER_ALLOC_REQ_FLAGS_TRAFFIC_ROCE;
    fa.enables = abi::CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR | abi::CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR_MASK |
                 abi::CFA_L2_FILTER_ALLOC_REQ_ENABLES_DST_ID;
    fa.l2_addr = {0x02, 0x52, 0x49, 0x47, 0x50, 0x00};
    fa.l2_addr_mask = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    fa.dst_id = 7;   // no such VNIC
    CHECK(m.send(fa).cmd_err() == err(cmd_err::unknown_object));
    fa.dst_id = vid;
    const response f = m.send(fa);
    REQUIRE(f.error_code() == 0);
    const std::uint64_t fid = f.as<abi::hwrm_cfa_l2_filter_alloc_output>().l2_filter_id;
    CHECK(fid != 0);
    CHECK(m.fn.roce_receive_ready());
    abi::hwrm_vnic_free_input vf;
    vf.vnic_id = vid;
    CHECK(m.send(vf).cmd_err() == err(cmd_err::in_use));   // the filter still names it
    abi::hwrm_cfa_l2_filter_free_input ff;
    ff.l2_filter_id = fid;
    CHECK(m.send(ff).error_code() == 0);
    CHECK(m.send(ff).error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
    CHECK_FALSE(m.fn.roce_receive_ready());
    CHECK(m.send(vf).error_code() == 0);
}

TEST_CASE("bnxt model: the link-change async event on the ring FUNC_CFG names", "[bnxt_model]") {
    served_bnxt m;
    const std::uint16_t nq = alloc_ring(m, ring_request(m, abi::RING_ALLOC_REQ_RING_TYPE_NQ, 256, 0));
    auto cq = ring_request(m, abi::RING_ALLOC_REQ_RING_TYPE_L2_CMPL, 256, 0);
    cq.enables = abi::RING_ALLOC_REQ_ENABLES_NQ_RING_ID_VALID;
    cq.nq_ring_id = nq;
    const std::byte* ring = m.mem.data() + (cq.page_tbl_addr - m.iova);
    const std::uint16_t cmpl = alloc_ring(m, cq);
    CHECK_FALSE(m.fn.set_link(false));   // nobody registered for it
    abi::hwrm_func_drv_rgtr_input r;
    r.enables = abi::FUNC_DRV_RGTR_REQ_ENABLES_ASYNC_EVENT_FWD;
    r.async_event_fwd[0] = 0x01;
    REQUIRE(m.send(r).error_code() == 0);
    abi::hwrm_func_cfg_input c;
    c.enables = abi::FUNC_CFG_REQ_ENABLES_ASYNC_EVENT_CR;
    c.async_event_cr = 99;
    CHECK(m.send(c).cmd_err() == err(cmd_err::unknown_object));
    c.async_event_cr = cmpl;
    REQUIRE(m.send(c).error_code() == 0);
    REQUIRE(m.fn.set_link(false));
    const auto e = *abi::decode<abi::hwrm_async_event_cmpl>(std::span<const std::byte>(ring, 16));
    CHECK(e.type == abi::ASYNC_EVENT_CMPL_TYPE_HWRM_ASYNC_EVENT);
    CHECK(e.event_id == abi::ASYNC_EVENT_CMPL_EVENT_ID_LINK_STATUS_CHANGE);
    CHECK(e.event_data1 == 0);
    CHECK(e.v == 1);
    CHECK(m.send(abi::hwrm_port_phy_qcfg_input{}).as<abi::hwrm_port_phy_qcfg_output>().link ==
          abi::PORT_PHY_QCFG_RESP_LINK_NO_LINK);
    REQUIRE(m.fn.set_link(true));
    const auto up = *abi::decode<abi::hwrm_async_event_cmpl>(std::span<const std::byte>(ring + 16, 16));
    CHECK(up.event_data1 == 1);
    CHECK(up.v == 1);
}

TEST_CASE("bnxt model: FUNC_RESET and the client's going leave nothing", "[bnxt_model]") {
    served_bnxt m;
    alloc_ring(m, ring_request(m, abi::RING_ALLOC_REQ_RING_TYPE_NQ, 256, 0));
    CHECK(m.send(abi::hwrm_vnic_alloc_input{}).error_code() == 0);
    abi::hwrm_func_reset_input vf;
    vf.func_reset_level = 3;   // RESETVF: the function has none
    CHECK(m.send(vf).error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
    CHECK(m.send(abi::hwrm_func_reset_input{}).error_code() == 0);
    CHECK(m.fn.rings() == 0);
    m.fn.with_firmware([](const sim::bnxt::firmware& f) { CHECK(f.vnics().empty()); });
    alloc_ring(m, ring_request(m, abi::RING_ALLOC_REQ_RING_TYPE_NQ, 256, 0));
    CHECK(m.fn.rings() == 1);
    m.f->release();   // the client goes
    for (int i = 0; i < 200 && m.srv->client_connected(); ++i) {
        std::this_thread::sleep_for(5ms);
    }
    CHECK(m.fn.rings() == 0);
}
