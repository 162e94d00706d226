// The bnxt model's data path (sim/bnxt/datapath.hpp, docs/bnxt-data-path.md): two functions on
// one in-process wire, RC QPs connected by MODIFY_QP, WQEs written with abi/bnxt/wqe.hpp,
// doorbells stored into the BAR2 DPI page. Asserts bytes and states, never times.
#include "datapath_setup.hpp"

using namespace rig::test::bnxt;
namespace sim = rig::sim;

namespace {

std::string pattern(std::size_t n, char seed) {
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; ++i) {
        s[i] = static_cast<char>(seed + i * 7);
    }
    return s;
}

bool same_bytes(const std::byte* p, const std::string& s) { return std::memcmp(p, s.data(), s.size()) == 0; }

// Waits until `p` holds `s` (the data path moved it).
bool arrives(const std::byte* p, const std::string& s, std::chrono::milliseconds timeout = 2000ms) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
        rig::abi::barrier::from_device();
        if (same_bytes(p, s)) {
            return true;
        }
        std::this_thread::sleep_for(50us);
    }
    return false;
}

sim::bnxt::function_options opts(bool aggregate, bool hw_flush) {
    sim::bnxt::function_options o;
    o.aggregate_requester_cqes = aggregate;
    o.hw_flush_cqes = hw_flush;
    return o;
}

// Posts three unsignalled 64-byte WRITEs and a signalled one from a to b, one doorbell.
void four_writes(bnxt_node& a, bnxt_node& b) {
    const std::string w = pattern(64, 'a');
    std::memcpy(a.buffer.host, w.data(), w.size());
    const abi::local src = a.local(0, 64);
    for (int i = 0; i < 3; ++i) {
        a.put({abi::write_op{std::span(&src, 1), b.remote(64 * i)}, false});
    }
    a.put({abi::write_op{std::span(&src, 1), b.remote(512)}, true});
    a.ring_sq();
}

}  // namespace

TEST_CASE("bnxt model data path: WRITE, SEND with RECV and READ move the bytes; REQ and RES_RC CQEs",
          "[bnxt_model][datapath]") {
    bnxt_pair p;
    auto& a = p.a;
    auto& b = p.b;
    // RDMA WRITE, 3000 bytes (three packets at MTU 1024), signalled
    const std::string w = pattern(3000, 'w');
    std::memcpy(a.buffer.host, w.data(), w.size());
    const abi::local src = a.local(0, 3000);
    a.post({abi::write_op{std::span(&src, 1), b.remote(4096)}, true});
    REQUIRE(arrives(b.buffer.host + 4096, w));
    auto e = a.next(a.scq);
    REQUIRE(e);
    CHECK(std::to_integer<unsigned>((*e)[24]) == 1);   // toggle 1, type REQ (0)
    auto req = as_req(*e);
    CHECK(req.cqe_type == abi::CQ_BASE_CQE_TYPE_REQ);
    CHECK(req.status == abi::CQ_REQ_STATUS_OK);
    CHECK(req.sq_cons_idx == 1);
    CHECK(req.qp_handle == a.qp_handle);
    CHECK(req.toggle == 1);
    a.consumed(a.scq);

    // SEND into b's posted receive
    b.receive(static_cast<std::int64_t>(buffer_va) + 8192, 4096, 0xabcde);
    const std::string s = pattern(2100, 's');
    std::memcpy(a.buffer.host + 1024, s.data(), s.size());
    const abi::local ssrc = a.local(1024, 2100);
    a.post({abi::send_op{std::span(&ssrc, 1)}, true});
    e = b.next(b.rcq);
    REQUIRE(e);
    const auto res = as_res(*e);
    CHECK(res.cqe_type == abi::CQ_BASE_CQE_TYPE_RES_RC);
    CHECK(res.status == abi::CQ_RES_RC_STATUS_OK);
    CHECK(res.length == 2100);
    CHECK(res.srq_or_rq_wr_id == 0xabcde);
    CHECK(res.qp_handle == b.qp_handle);
    CHECK(res.toggle == 1);
    CHECK(same_bytes(b.buffer.host + 8192, s));
    e = a.next(a.scq);
    REQUIRE(e);
    CHECK(as_req(*e).sq_cons_idx == 2);
    CHECK(as_req(*e).status == abi::CQ_REQ_STATUS_OK);

    // RDMA READ of b's bytes into a, then an inline WRITE
    const std::string r = pattern(1500, 'r');
    std::memcpy(b.buffer.host + 12288, r.data(), r.size());
    const abi::local dst = a.local(8192, 1500);
    a.post({abi::read_op{b.remote(12288), std::span(&dst, 1)}, true});
    e = a.next(a.scq);
    REQUIRE(e);
    CHECK(as_req(*e).status == abi::CQ_REQ_STATUS_OK);
    CHECK(as_req(*e).sq_cons_idx == 3);
    CHECK(same_bytes(a.buffer.host + 8192, r));
    a.post({abi::write_inline_op{"inline bytes, carried in the WQE", b.remote(100)}, true});
    e = a.next(a.scq);
    REQUIRE(e);
    CHECK(as_req(*e).sq_cons_idx == 4);
    CHECK(same_bytes(b.buffer.host + 100, "inline bytes, carried in the WQE"));
    CHECK(a.dp().wqes_fetched() == 4);
}

TEST_CASE("bnxt model data path: unsignalled WQEs are covered by the next signalled one's CQE",
          "[bnxt_model][datapath]") {
    bnxt_pair p;
    four_writes(p.a, p.b);
    auto e = p.a.next(p.a.scq);
    REQUIRE(e);
    CHECK(as_req(*e).status == abi::CQ_REQ_STATUS_OK);
    CHECK(as_req(*e).sq_cons_idx == 4);   // one CQE completes WQEs 0..3
    CHECK(same_bytes(p.b.buffer.host + 128, pattern(64, 'a')));
    p.a.passes(50);
    CHECK_FALSE(p.a.cqe_at(p.a.scq, p.a.scq.consumer));   // and none for the unsignalled ones
}

TEST_CASE("bnxt model data path: a doorbell is taken at any word of its DPI page", "[bnxt_model][datapath]") {
    // A driver may ring at any offset of its page (the model scans the page a block at a
    // time, doorbells.cpp): the SQ rung at the first and last word of each 512-byte block and
    // at the page's last word, one WRITE each, every one fetched and its bytes landed.
    bnxt_pair p;
    auto& a = p.a;
    const std::string w = pattern(64, 'z');
    std::memcpy(a.buffer.host, w.data(), w.size());
    const abi::local src = a.local(0, 64);
    unsigned n = 0;
    for (const unsigned word : {0u, 63u, 64u, 127u, 200u, 320u, 448u, 510u, 511u}) {
        a.put({abi::write_op{std::span(&src, 1), p.b.remote(1024 + 64 * n)}, true});
        a.ring(static_cast<db_word>(word), abi::DBC_DBC_TYPE_SQ, a.qp, a.sq_prod, sq_entries);
        INFO("doorbell at word " << word);
        REQUIRE(a.taken(user_dpi, word));
        REQUIRE(arrives(p.b.buffer.host + 1024 + 64 * n, w));
        auto e = a.next(a.scq);
        REQUIRE(e);
        CHECK(as_req(*e).status == abi::CQ_REQ_STATUS_OK);
        CHECK(as_req(*e).sq_cons_idx == ++n);
        a.consumed(a.scq);
    }
    CHECK(a.dp().wqes_fetched() == n);
}

TEST_CASE("bnxt model data path: aggregate_requester_cqes off gives every WQE its CQE", "[bnxt_model][datapath]") {
    bnxt_pair p(opts(false, false));
    four_writes(p.a, p.b);
    for (std::uint16_t k = 1; k <= 4; ++k) {
        const auto e = p.a.next(p.a.scq);
        REQUIRE(e);
        CHECK(as_req(*e).sq_cons_idx == k);
    }
}

TEST_CASE("bnxt model data path: a bad rkey fails the WQE REMOTE_ACCESS_ERR, the QP goes to ERR with a "
          "QP_ERROR_NOTIFICATION, and no flush CQEs",
          "[bnxt_model][datapath]") {
    const bool hw_flush = GENERATE(false, true);
    bnxt_pair p(opts(true, hw_flush));
    auto& a = p.a;
    auto& b = p.b;
    a.receive(static_cast<std::int64_t>(buffer_va), 64, 0x777);   // left on a when it fails
    const abi::local src = a.local(0, 64);
    a.post({abi::write_op{std::span(&src, 1), {static_cast<std::int64_t>(buffer_va), b.key + 7}}, false});
    a.post({abi::write_op{std::span(&src, 1), b.remote(0)}, true});   // flushed behind it
    auto e = a.next(a.scq);
    REQUIRE(e);
    CHECK(as_req(*e).status == abi::CQ_REQ_STATUS_REMOTE_ACCESS_ERR);
    CHECK(as_req(*e).sq_cons_idx == 1);   // the failed WQE, unsignalled, completes anyway
    CHECK(as_req(*e).qp_handle == a.qp_handle);
    const auto note = qp_error_of(a);
    CHECK(note.req_err_state_reason == abi::CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_NAK_ARRIVAL_2);
    CHECK(a.queried_state() == abi::CMDQ_MODIFY_QP_NEW_STATE_ERR);
    // the responder refused the WRITE: b fails too
    const auto bnote = qp_error_of(b);
    CHECK(bnote.res_err_state_reason == abi::CREQ_QP_ERROR_NOTIFICATION_RES_ERR_STATE_REASON_RES_RX_INVALID_R_KEY);
    CHECK(b.queried_state() == abi::CMDQ_MODIFY_QP_NEW_STATE_ERR);
    a.passes(50);
    CHECK_FALSE(a.cqe_at(a.scq, a.scq.consumer));   // the flushed WRITE: no CQE
    if (!hw_flush) {
        CHECK_FALSE(a.cqe_at(a.rcq, 0));
    } else {
        e = a.next(a.rcq);
        REQUIRE(e);
        CHECK(as_res(*e).status == abi::CQ_RES_RC_STATUS_HW_FLUSH_ERR);
        CHECK(as_res(*e).srq_or_rq_wr_id == 0x777);
    }
}

TEST_CASE("bnxt model data path: a malformed WQE completes LOCAL_QP_OPERATION_ERR and fails the QP",
          "[bnxt_model][datapath]") {
    bnxt_pair p;
    auto& a = p.a;
    const abi::local src = a.local(0, 64);
    a.put({abi::write_op{std::span(&src, 1), p.b.remote(0)}, false});
    a.sq.host[0] = std::byte{abi::SQ_BASE_WQE_TYPE_ATOMIC_CS};   // a type the model does not run
    a.ring_sq();
    const auto e = a.next(a.scq);
    REQUIRE(e);
    CHECK(as_req(*e).status == abi::CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR);
    CHECK(as_req(*e).sq_cons_idx == 1);
    const auto note = qp_error_of(a);
    CHECK(note.req_err_state_reason == abi::CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_WQE_FORMAT_ERROR);
    CHECK(a.queried_state() == abi::CMDQ_MODIFY_QP_NEW_STATE_ERR);
}

TEST_CASE("bnxt model data path: a doorbell on a page that is not its object's DPI is ignored and counted",
          "[bnxt_model][datapath]") {
    bnxt_pair p;
    auto& a = p.a;
    const std::uint64_t before = a.r.m.fn.doorbells_ignored();
    const abi::local src = a.local(0, 64);
    a.put({abi::write_op{std::span(&src, 1), p.b.remote(0)}, true});
    // the SQ doorbell on the privileged page (DPI 0), word 8: the QP's DPI is 16
    a.store(0, 8, abi::doorbell(abi::DBC_DBC_TYPE_SQ, a.qp, 1));
    REQUIRE(a.taken(0, 8));
    CHECK(a.r.m.fn.doorbells_ignored() == before + 1);
    // an xid naming nothing, and a path that is not RoCE
    a.store(user_dpi, 9, abi::doorbell(abi::DBC_DBC_TYPE_SQ, 0x999, 1));
    abi::dbc_dbc l2{};
    l2.type = abi::DBC_DBC_TYPE_SQ;
    l2.xid = a.qp;
    l2.index = 1;
    l2.path = abi::DBC_DBC_PATH_L2;
    l2.valid = 1;
    a.store(user_dpi, 10, abi::doorbell_value(l2));
    REQUIRE(a.taken(user_dpi, 9));
    REQUIRE(a.taken(user_dpi, 10));
    CHECK(a.r.m.fn.doorbells_ignored() == before + 3);
    a.passes(20);
    CHECK(a.dp().wqes_fetched() == 0);
    CHECK_FALSE(a.cqe_at(a.scq, 0));
    // the right page
    a.ring_sq();
    const auto e = a.next(a.scq);
    REQUIRE(e);
    CHECK(as_req(*e).sq_cons_idx == 1);
    CHECK(a.r.m.fn.doorbells_ignored() == before + 3);
}

TEST_CASE("bnxt model data path: an armed CQ's CQE puts an nq_cn on its NQ and raises the armed NQ's MSI-X",
          "[bnxt_model][datapath]") {
    bnxt_pair p;
    auto& a = p.a;
    a.ring(db_word::send_cq_arm, abi::DBC_DBC_TYPE_CQ_ARMALL, a.scq.id, 0, a.scq.entries);
    a.store(0, 1, abi::doorbell(abi::DBC_DBC_TYPE_NQ_ARM, a.nq, 0));   // the NQ's arm: privileged page, word 1
    REQUIRE(a.taken(user_dpi, static_cast<unsigned>(db_word::send_cq_arm)));
    REQUIRE(a.taken(0, 1));
    const abi::local src = a.local(0, 64);
    a.post({abi::write_op{std::span(&src, 1), p.b.remote(0)}, true});
    REQUIRE(a.next(a.scq));
    CHECK(a.r.ch.interrupts(2) >= 1);
    rig::abi::barrier::from_device();
    const auto n = *abi::decode<abi::nq_cn>(std::span<const std::byte>(a.nq_mem.host, 16));
    CHECK(n.type == abi::NQ_CN_TYPE_CQ_NOTIFICATION);
    CHECK(n.v == 1);
    CHECK((std::uint64_t{n.cq_handle_high} << 32 | n.cq_handle_low) == 0x5c0000000001ull + 1);
    // disarmed: the next CQE writes no NQ entry
    a.consumed(a.scq);
    a.post({abi::write_op{std::span(&src, 1), p.b.remote(0)}, true});
    REQUIRE(a.next(a.scq));
    a.passes(20);
    CHECK(std::to_integer<unsigned>(a.nq_mem.host[16 + 8]) == 0);
    CHECK(a.dp().notifications() == 1);
}

TEST_CASE("bnxt model data path: CQEs wait while the CQ is full, until the consumer moves",
          "[bnxt_model][datapath]") {
    bnxt_pair p({}, 4);   // a's send CQ holds 4 CQEs
    auto& a = p.a;
    const std::string w = pattern(64, 'c');
    std::memcpy(a.buffer.host, w.data(), w.size());
    const abi::local src = a.local(0, 64);
    for (int i = 0; i < 6; ++i) {
        a.put({abi::write_op{std::span(&src, 1), p.b.remote(64 * i)}, true});
    }
    a.ring_sq();
    REQUIRE(arrives(p.b.buffer.host + 64 * 5, w));
    for (std::uint32_t k = 0; k < 4; ++k) {
        const auto e = a.next(a.scq);
        REQUIRE(e);
        CHECK(as_req(*e).sq_cons_idx == k + 1);
    }
    a.passes(50);
    // the consumer has not moved: CQE 0 is still the first one, nothing of the second pass
    CHECK_FALSE(a.cqe_at(a.scq, 4));
    CHECK(as_req(*a.cqe_at(a.scq, 0)).sq_cons_idx == 1);
    a.consumed(a.scq);   // consumer 4: index 0, epoch 1
    for (std::uint32_t k = 4; k < 6; ++k) {
        const auto e = a.next(a.scq);
        REQUIRE(e);
        CHECK(as_req(*e).sq_cons_idx == k + 1);
        CHECK(as_req(*e).toggle == 0);   // the second pass over the ring
    }
}

// A RoCE command's objects are followed alone (firmware::take_changes, sim/bnxt/follow.cpp):
// one more QP brought to RTS beside 25 follows 4 objects (its CREATE_QP and three MODIFY_QPs),
// where following every table per command followed over 100 (setting up N QPs cost N^2:
// rig-perf --family bnxt -q 1024). The QPs that exist keep moving bytes.
TEST_CASE("bnxt model data path: a command is followed by the objects it touched", "[bnxt_model][datapath]") {
    bnxt_pair p;
    auto& a = p.a;
    auto& b = p.b;
    const std::uint32_t first = a.qp;
    const auto first_sq = a.sq;
    for (int i = 0; i < 24; ++i) {
        a.make_qp();   // left in RESET
    }
    const std::uint64_t before = a.dp().objects_followed();
    a.make_qp();
    a.connect(b, 0x500, 0x600);
    CHECK(a.dp().objects_followed() - before == 4);
    // back to the first QP, connected to b's: a WRITE still lands
    a.qp = first;
    a.sq = first_sq;
    four_writes(a, b);
    CHECK(arrives(b.buffer.host + 512, pattern(64, 'a')));
}
