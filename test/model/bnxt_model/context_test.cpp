// The bnxt model's context memory: FUNC_BACKING_STORE_QCAPS and
// _CFG sized as bnxt_en sizes it with RoCE on (bnxt.c bnxt_alloc_ctx_mem), page directories at
// levels 1 and 2, the initializer, and the ledger: too little, bad tables, unmapped while owned.
#include "context_setup.hpp"

using namespace rig::test::bnxt;
namespace sim = rig::sim;
using sim::bnxt::cmd_err;

namespace {

std::uint8_t err(cmd_err e) { return static_cast<std::uint8_t>(e); }

}  // namespace

TEST_CASE("bnxt model: FUNC_BACKING_STORE_QCAPS", "[bnxt_model]") {
    served_bnxt m;
    const auto q = qcaps(m);
    CHECK(q.qp_max_entries == 4096);
    CHECK(q.qp_min_qp1_entries == 64);
    CHECK(q.qp_max_l2_entries == 256);
    CHECK(q.qp_entry_size == 512);
    CHECK(q.cq_max_entries == 8192);
    CHECK(q.mrav_max_entries == 32768);
    CHECK(q.tim_max_entries == 8192);
    CHECK(q.tqm_fp_rings_count == 8);
    CHECK(q.ctx_kind_initializer == 0xff);
    CHECK(q.ctx_init_mask == 0x3f);
}

TEST_CASE("bnxt model: RoCE-sized context memory is taken and owned", "[bnxt_model]") {
    served_bnxt m;
    context_memory cm(m);
    const auto q = qcaps(m);
    auto req = roce_request(cm, q);
    CHECK_FALSE(m.fn.roce_backing_store());

    SECTION("accepted: every page in the ledger; unmapping them is reported") {
        const response r = m.send(req);   // 336 bytes: a short command
        REQUIRE(r.arrived());
        CHECK(r.error_code() == 0);
        CHECK(r.resp_len() == 16);
        CHECK(m.fn.roce_backing_store());
        CHECK(m.fn.context_pages() == cm.used / 4096);
        CHECK(m.fn.context_violations().empty());
        m.fn.with_firmware([](const sim::bnxt::firmware& f) {
            CHECK(f.context().at("QP").level == 2);
            CHECK(f.context().at("QP").pages.size() == 512);
            CHECK(f.context().at("CQ").level == 1);
        });
        REQUIRE(m.f->dma_unmap(cm.iova, cm.bytes).has_value());
        const auto v = m.fn.context_violations();
        CHECK(v.size() == cm.used / 4096);
        REQUIRE_FALSE(v.empty());
        CHECK(v[0].what.find("unmapped by the driver while owned by the firmware") != std::string::npos);
    }
    SECTION("FUNC_RESET gives it back: unmapping it then is no violation") {
        REQUIRE(m.send(req).error_code() == 0);
        REQUIRE(m.send(abi::hwrm_func_reset_input{}).error_code() == 0);
        CHECK(m.fn.context_pages() == 0);
        CHECK_FALSE(m.fn.roce_backing_store());
        REQUIRE(m.f->dma_unmap(cm.iova, cm.bytes).has_value());
        CHECK(m.fn.context_violations().empty());
    }
    SECTION("the kernel's 256-byte legacy request is taken") {
        const auto b = abi::to_bytes(req);
        const response r = m.send_bytes(std::vector<std::byte>(b.begin(), b.begin() + 256));
        CHECK(r.error_code() == 0);
        CHECK(m.fn.roce_backing_store());
    }
    SECTION("through the window it is too long") {
        const response r = m.send(req, send_mode::window);
        CHECK(r.error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
        CHECK(r.cmd_err() == err(cmd_err::longer_than_window));
        CHECK(m.fn.context_pages() == 0);
    }
    SECTION("too few QP entries for the L2 and QP1 ones") {
        req.qp_num_entries = q.qp_max_l2_entries;
        const response r = m.send(req);
        CHECK(r.error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
        CHECK(r.cmd_err() == err(cmd_err::too_small));
        CHECK(m.fn.context_pages() == 0);   // nothing taken of a refused request
    }
    SECTION("more entries than QCAPS allows") {
        req.cq_num_entries = q.cq_max_entries + 1;
        const response r = m.send(req);
        CHECK(r.error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
        CHECK(r.cmd_err() == err(cmd_err::too_large));
    }
    SECTION("an entry size other than QCAPS's") {
        req.mrav_entry_size = 128;
        const response r = m.send(req);
        CHECK(r.error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
        CHECK(r.cmd_err() == err(cmd_err::bad_entry_size));
    }
    SECTION("a PTE without its valid bit") {
        std::byte* pte = cm.host(req.cq_page_dir) + 8 * 3;
        rig::abi::store_le<std::uint64_t>(pte, rig::abi::load_le<std::uint64_t>(pte) & ~1ull);
        const response r = m.send(req);
        CHECK(r.error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
        CHECK(r.cmd_err() == err(cmd_err::bad_page_table));
    }
    SECTION("too many pages for one level-1 table") {
        req.qpc_lvl = 1;
        const response r = m.send(req);
        CHECK(r.error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
        // 2 MiB of QP context is 512 pages; the PDE page read as PTEs lists only 1 valid one
        CHECK((r.cmd_err() == err(cmd_err::bad_page_table) || r.cmd_err() == err(cmd_err::too_large)));
    }
    SECTION("an enables bit the model lacks (TKC)") {
        req.enables |= 0x80000;
        const response r = m.send(req);
        CHECK(r.error_code() == abi::HWRM_ERR_CODE_INVALID_ENABLES);
        CHECK(r.cmd_err() == err(cmd_err::unknown_enables));
    }
}

TEST_CASE("bnxt model: context memory without its initializer is reported", "[bnxt_model]") {
    served_bnxt m;
    context_memory cm(m);
    cm.init = 0;   // the driver forgets ctx_kind_initializer
    const auto req = roce_request(cm, qcaps(m));
    CHECK(m.send(req).error_code() == 0);   // a card takes it; it would read garbage contexts
    const auto v = m.fn.context_violations();
    CHECK(v.size() == 6);   // QP, SRQ, CQ, VNIC, STAT, MRAV: one report each
    REQUIRE_FALSE(v.empty());
    CHECK(v[0].what.find("not initialized") != std::string::npos);
}

TEST_CASE("bnxt model: L2-only context memory (as DPDK gives it) is not RoCE-sized", "[bnxt_model]") {
    served_bnxt m;
    context_memory cm(m);
    const auto q = qcaps(m);
    auto req = roce_request(cm, q);
    req.enables = 0x1 | 0x2 | 0x4 | 0x8 | 0x10;   // no MRAV, no TIM
    req.qp_num_entries = std::uint32_t{q.qp_min_qp1_entries} + q.qp_max_l2_entries;
    CHECK(m.send(req).error_code() == 0);
    CHECK_FALSE(m.fn.roce_backing_store());
}
