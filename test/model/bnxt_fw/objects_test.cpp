// firmware/bnxt's RoCE objects (objects.hpp) against the bnxt model served over vfio-user: a CQ,
// MRs at level 0 and 1, an RC QP taken RESET->INIT->RTR->RTS, queried, to ERR and RESET, the
// destroys, with the model's own view checked; refusals that leave everything as it was; misuse;
// a silent firmware that strands what it may still name.
#include <catch2/catch.hpp>

#include <chrono>
#include <stdexcept>

#include "abi/bnxt/rcfw_cmds.hpp"
#include "firmware/bnxt/device.hpp"
#include "firmware/bnxt/objects.hpp"
#include "served_bnxt.hpp"

using namespace std::chrono_literals;
namespace abi = rig::bnxt::abi;
namespace fw = rig::firmware::bnxt;
namespace drv = rig::driver;
using clk = std::chrono::steady_clock;
using rig::test::bnxt_fw::served_bnxt;

namespace {

// A served model with the device up to ADD_GID, and 64 KiB of mapped memory for MRs.
struct roce_device {
    served_bnxt m;
    std::unique_ptr<fw::device> dev;
    drv::dma_memory data;
    std::uint64_t data_iova = 0;

    explicit roce_device(std::chrono::milliseconds rcfw_timeout = 5000ms) {
        fw::device_options o;
        o.creq_entries = 1024;
        o.rcfw.cmdq_slots = 256;
        o.rcfw.timeout = rcfw_timeout;
        auto d = fw::device::bring_up(*m.f, o);
        REQUIRE(d.has_value());
        dev = std::move(*d);
        auto mem = drv::dma_memory::allocate(64 << 10, drv::page_choice::small_only);
        REQUIRE(mem.has_value());
        data = std::move(*mem);
        auto iova = m.f->dma_map(data, 0, data.size(), drv::dma_access::read_write);
        REQUIRE(iova.has_value());
        data_iova = *iova;
    }
    fw::rcfw_channel& ch() { return *dev->rcfw(); }
    rig::firmware::stranded_memory& stranded() { return dev->stranded_registry(); }
    static clk::time_point by() { return clk::now() + 5s; }
    fw::cq make_cq(std::uint32_t entries = 256) {
        auto c = fw::cq::create(ch(), *m.f, stranded(), {.entries = entries, .nq_ring = dev->creq_ring_id()}, by());
        REQUIRE(c.has_value());
        return std::move(*c);
    }
    fw::qp make_qp(std::uint32_t pd, const fw::cq& c) {
        auto q = fw::qp::create(ch(), *m.f, stranded(), {.pd = pd, .send_cq = c.id(), .receive_cq = c.id()}, by());
        REQUIRE(q.has_value());
        return std::move(*q);
    }
    fw::qp_rtr_params rtr() const {
        fw::qp_rtr_params p;
        p.remote_qpn = 0x33;
        p.rq_psn = 0x100;
        p.path_mtu = abi::CMDQ_MODIFY_QP_PATH_MTU_MTU_4096;
        p.dgid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 2};
        p.dmac = {0x02, 0x52, 0x49, 0x47, 0x50, 0x01};
        p.sgid_index = static_cast<std::uint16_t>(dev->gid_index().value());
        return p;
    }
    template <class F>
    auto model(F&& f) {
        return m.fn.with_firmware(std::forward<F>(f));
    }
};

}  // namespace

TEST_CASE("bnxt objects: CQ, MRs and an RC QP through RTS, queried, destroyed; the model agrees", "[model][bnxt_fw][objects]") {
    roce_device r;
    fw::pd_numbers pds(r.dev->roce().max_pd);
    const std::uint32_t pd = pds.alloc().value();
    auto c = r.make_cq(512);   // 16 KiB: four pages, level 1
    r.model([&](const rig::sim::bnxt::firmware& f) {
        REQUIRE(f.rcfw().cqs.contains(c.id()));
        CHECK(f.rcfw().cqs.at(c.id()).entries == 512);
        CHECK(f.rcfw().cqs.at(c.id()).memory.pages.size() == 4);
        CHECK(f.rcfw().cqs.at(c.id()).memory.pages[0] == c.iova());
    });

    auto one_page = fw::mr::create(r.ch(), *r.m.f, r.stranded(), pd, r.data_iova + 0x100, 0x200,
                                   {.local_write = true}, r.by());
    REQUIRE(one_page.has_value());
    CHECK(one_page->level() == 0);
    auto three_pages = fw::mr::create(r.ch(), *r.m.f, r.stranded(), pd, r.data_iova + 0x1800, 0x2000,
                                      {.local_write = true, .remote_read = true, .remote_write = true}, r.by());
    REQUIRE(three_pages.has_value());
    CHECK(three_pages->level() == 1);
    CHECK(three_pages->lkey() != one_page->lkey());
    r.model([&](const rig::sim::bnxt::firmware& f) {
        const auto& k = f.rcfw().keys.at(three_pages->lkey());
        CHECK(k.registered);
        CHECK(k.va == r.data_iova + 0x1800);
        CHECK(k.bytes == 0x2000);
        CHECK(k.memory.pages == std::vector<std::uint64_t>{r.data_iova + 0x1000, r.data_iova + 0x2000, r.data_iova + 0x3000});
        CHECK(k.access == (abi::CMDQ_REGISTER_MR_ACCESS_LOCAL_WRITE | abi::CMDQ_REGISTER_MR_ACCESS_REMOTE_READ |
                           abi::CMDQ_REGISTER_MR_ACCESS_REMOTE_WRITE));
    });

    auto q = r.make_qp(pd, c);
    CHECK(q.id() >= 2);
    REQUIRE(q.rst2init(r.ch(), {.remote_read = true, .remote_write = true}, r.by()).has_value());
    REQUIRE(q.init2rtr(r.ch(), r.rtr(), r.by()).has_value());
    REQUIRE(q.rtr2rts(r.ch(), {.sq_psn = 0x200}, r.by()).has_value());
    const auto s = q.query(r.ch(), r.by());
    REQUIRE(s.has_value());
    CHECK(s->state == abi::CMDQ_MODIFY_QP_NEW_STATE_RTS);
    CHECK(s->remote_qpn == 0x33);
    CHECK(s->rq_psn == 0x100);
    CHECK(s->sq_psn == 0x200);
    CHECK(s->path_mtu == abi::CMDQ_MODIFY_QP_PATH_MTU_MTU_4096);
    CHECK(s->timeout == 14);
    CHECK(s->retry_cnt == 7);
    CHECK(s->rnr_retry == 7);
    CHECK(s->min_rnr_timer == 12);
    CHECK(s->max_rd_atomic == 16);
    CHECK(s->max_dest_rd_atomic == 16);
    CHECK(s->dgid == r.rtr().dgid);
    CHECK(s->dmac == r.rtr().dmac);
    CHECK(s->access.remote_write);
    CHECK_FALSE(s->access.remote_atomic);
    r.model([&](const rig::sim::bnxt::firmware& f) {
        const auto& mq = f.rcfw().qps.at(q.id());
        CHECK(mq.attributes.max_rd_atomic == 17);       // ORRQ slots
        CHECK(mq.attributes.max_dest_rd_atomic == 34);  // IRRQ slots
        CHECK(mq.sq.pages.size() == 3);                 // 64 x (128 + 16) bytes
        CHECK(mq.attributes.network_type == abi::CMDQ_MODIFY_QP_NETWORK_TYPE_ROCEV2_IPV4);
    });
    REQUIRE(q.to_error(r.ch(), r.by()).has_value());
    REQUIRE(q.to_reset(r.ch(), r.by()).has_value());
    CHECK(q.query(r.ch(), r.by())->state == abi::CMDQ_MODIFY_QP_NEW_STATE_RESET);

    REQUIRE(q.destroy(r.ch(), *r.m.f, r.stranded(), r.by()).has_value());
    CHECK_FALSE(q.alive());
    REQUIRE(c.destroy(r.ch(), *r.m.f, r.stranded(), r.by()).has_value());
    REQUIRE(one_page->destroy(r.ch(), *r.m.f, r.stranded(), r.by()).has_value());
    REQUIRE(three_pages->destroy(r.ch(), *r.m.f, r.stranded(), r.by()).has_value());
    pds.free(pd);
    r.model([](const rig::sim::bnxt::firmware& f) {
        CHECK(f.rcfw().qps.empty());
        CHECK(f.rcfw().cqs.empty());
        CHECK(f.rcfw().keys.empty());
        CHECK(f.context_violations().empty());
    });
    REQUIRE(r.dev->teardown().has_value());
    CHECK(r.dev->stranded().empty());
}

TEST_CASE("bnxt objects: refusals name the command and status and leave the objects as they were", "[model][bnxt_fw][objects]") {
    roce_device r;
    auto c = r.make_cq();
    auto q = r.make_qp(1, c);
    // INIT->RTR from RESET: the firmware's INVALID_PARAMETER, the QP still RESET and usable
    const auto early = q.init2rtr(r.ch(), r.rtr(), r.by());
    REQUIRE_FALSE(early.has_value());
    CHECK(early.error().kind == fw::error_kind::status);
    CHECK(early.error().error_code == abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
    CHECK(early.error().message.find("MODIFY_QP") != std::string::npos);
    CHECK(q.query(r.ch(), r.by())->state == abi::CMDQ_MODIFY_QP_NEW_STATE_RESET);
    REQUIRE(q.rst2init(r.ch(), {}, r.by()).has_value());
    // a GID index naming nothing
    auto no_gid = r.rtr();
    no_gid.sgid_index = 200;
    CHECK(q.init2rtr(r.ch(), no_gid, r.by()).error().error_code == abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
    CHECK(q.query(r.ch(), r.by())->state == abi::CMDQ_MODIFY_QP_NEW_STATE_INIT);
    // the CQ a QP names stays, and stays usable
    const auto busy = c.destroy(r.ch(), *r.m.f, r.stranded(), r.by());
    REQUIRE_FALSE(busy.has_value());
    CHECK(busy.error().message.find("DESTROY_CQ") != std::string::npos);
    CHECK(c.alive());
    // a CQ id naming nothing: the QP's memory given back, nothing made
    auto bad = fw::qp::create(r.ch(), *r.m.f, r.stranded(), {.pd = 1, .send_cq = c.id() + 7, .receive_cq = c.id()}, r.by());
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().error_code == abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
    // a chosen status for the next REGISTER_MR: the key ALLOCATE_MRW made is freed again
    r.m.fn.fail_next_rcfw(abi::CMDQ_BASE_OPCODE_REGISTER_MR, abi::CREQ_QP_EVENT_STATUS_RESOURCES);
    const auto mr = fw::mr::create(r.ch(), *r.m.f, r.stranded(), 1, r.data_iova, 0x3000, {.local_write = true}, r.by());
    REQUIRE_FALSE(mr.has_value());
    CHECK(mr.error().error_code == abi::CREQ_QP_EVENT_STATUS_RESOURCES);
    r.model([](const rig::sim::bnxt::firmware& f) {
        CHECK(f.rcfw().qps.size() == 1);
        CHECK(f.rcfw().keys.empty());
    });
    CHECK(r.stranded().report().empty());
    REQUIRE(q.destroy(r.ch(), *r.m.f, r.stranded(), r.by()).has_value());
    REQUIRE(c.destroy(r.ch(), *r.m.f, r.stranded(), r.by()).has_value());
}

TEST_CASE("bnxt objects: misuse throws std::invalid_argument and sends nothing", "[model][bnxt_fw][objects]") {
    roce_device r;
    const auto sent = [&] { return r.model([](const rig::sim::bnxt::firmware& f) { return f.rcfw().completed; }); };
    const auto before = sent();
    CHECK_THROWS_AS(fw::cq::create(r.ch(), *r.m.f, r.stranded(), {.entries = 0}, r.by()), std::invalid_argument);
    CHECK_THROWS_AS(fw::mr::create(r.ch(), *r.m.f, r.stranded(), 1, r.data_iova, 0, {}, r.by()), std::invalid_argument);
    CHECK_THROWS_AS(fw::mr::create(r.ch(), *r.m.f, r.stranded(), 1, r.data_iova, 4096, {.remote_write = true}, r.by()),
                    std::invalid_argument);
    CHECK_THROWS_AS(fw::qp::create(r.ch(), *r.m.f, r.stranded(), {.sq_sge = 7}, r.by()), std::invalid_argument);
    fw::qp dead;
    CHECK_THROWS_AS(dead.to_error(r.ch(), r.by()), std::invalid_argument);
    CHECK(sent() == before);
    fw::pd_numbers pds(2);
    CHECK(pds.alloc().value() == 0);
    CHECK(pds.alloc().value() == 1);
    const auto full = pds.alloc();
    REQUIRE_FALSE(full.has_value());
    CHECK(full.error().message.find("max_pd") != std::string::npos);
    CHECK_THROWS_AS(pds.free(5), std::invalid_argument);
    pds.free(0);
    CHECK(pds.alloc().value() == 0);
}

TEST_CASE("bnxt objects: a silent firmware at DESTROY_QP strands the QP's memory", "[model][bnxt_fw][objects]") {
    roce_device r(300ms);
    auto c = r.make_cq();
    auto q = r.make_qp(1, c);
    r.m.fn.silence();
    const auto gone = q.destroy(r.ch(), *r.m.f, r.stranded(), clk::now() + 300ms);
    REQUIRE_FALSE(gone.has_value());
    CHECK(gone.error().kind == fw::error_kind::timeout);
    CHECK_FALSE(q.alive());
    bool send_queue = false;
    for (const auto& s : r.stranded().report()) {
        send_queue = send_queue || s.what == "QP " + std::to_string(q.id()) + " send queue";
    }
    CHECK(send_queue);
    r.m.fn.resume();
}
