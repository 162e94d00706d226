// The bnxt model's retransmissions by the driver's PSN search entries (docs/bnxt-data-path.md
// "Queues"): with frames lost, a go-back-N finds its WQE by the sq_psn_search_ext entry the
// driver wrote after the SQ ring; an entry that disagrees with the WQE fails it
// LOCAL_QP_OPERATION_ERR and the QP (ERR, QP_ERROR_NOTIFICATION RETX_SETUP_ERROR); without loss
// the entry is never read. Two functions on one wire, raw WQEs and doorbells (datapath_setup.hpp).
#include <functional>
#include <optional>

#include "datapath_setup.hpp"
#include "test/within.hpp"

using namespace rig::test::bnxt;
namespace sim = rig::sim;

namespace {

constexpr std::uint32_t path_mtu = 1024;   // bnxt_node::connect
constexpr std::uint32_t a_sq_psn = 0x100;  // bnxt_pair: a's first PSN

std::string pattern(std::size_t n, char seed) {
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; ++i) {
        s[i] = static_cast<char>(seed + i * 13);
    }
    return s;
}

bool same_bytes(const std::byte* p, const std::string& s) {
    rig::abi::barrier::from_device();
    return std::memcmp(p, s.data(), s.size()) == 0;
}

bool eventually(const std::function<bool()>& f, std::chrono::milliseconds timeout = 3000ms) {
    return rig::test::within(timeout, f, std::chrono::microseconds(50));
}

// What the driver keeps per WQE: the PSN it sends from next (qp/bnxt/send_queue.hpp).
struct psn_writer {
    std::uint32_t next = a_sq_psn;
    // The sq_psn_search_ext entry of the WQE at `n`'s producer (written before put()), as the
    // driver writes it; `start_delta`/`next_delta`/`opcode` make it wrong on purpose.
    void write(bnxt_node& n, std::uint8_t wqe_type, std::uint32_t bytes, std::uint32_t start_delta = 0,
               std::uint32_t next_delta = 0, std::optional<std::uint8_t> opcode = std::nullopt) {
        const std::uint32_t packets = bytes == 0 ? 1 : (bytes + path_mtu - 1) / path_mtu;
        const std::uint32_t start = next;
        next = (next + packets) & 0xffffff;
        const std::uint32_t k = n.sq_prod % sq_entries;
        std::byte* entry = n.sq.host + std::size_t{sq_entries} * 128 + std::size_t{k} * abi::sq_psn_search_ext::layout_size;
        abi::fast::write_psn_search(entry, (start + start_delta) & 0xffffff, opcode.value_or(wqe_type),
                                    (next + next_delta) & 0xffffff, static_cast<std::uint16_t>(k * abi::static_wqe_slots));
    }
};

// Lets every frame on the wire through again once `frames` more were dropped (a window of loss
// that a WQE's packets fall into whole).
void lose(sim::roce::wire& w, std::uint64_t frames, const std::function<void()>& post) {
    const std::uint64_t before = w.counters().dropped;
    w.set_faults({1.0, 0, {}, {}});
    post();
    const bool lost = eventually([&] { return w.counters().dropped >= before + frames; });
    w.set_faults({});
    REQUIRE(lost);
}

}  // namespace

TEST_CASE("bnxt model retransmissions: with the driver's PSN search entries right, multi-packet WRITEs complete "
          "OK through 10 % loss and their bytes land",
          "[bnxt_model][datapath][retransmit]") {
    bnxt_pair p;
    auto& a = p.a;
    auto& b = p.b;
    psn_writer psns;
    constexpr std::uint32_t bytes = 3000;   // three packets: losses inside a WQE's PSNs too
    p.wire.set_faults({0.10, 0, {}, {}});
    std::uint64_t done = 0;
    // until a go-back-N happened a few times (at least 24 WRITEs), at most 400
    for (std::uint32_t i = 0; i < 400 && (i < 24 || a.dp().retransmissions_located() < 3); ++i) {
        const std::string w = pattern(bytes, static_cast<char>('A' + i % 50));
        const std::size_t from = (i % 2) * 4096, to = 8192 + (i % 2) * 4096;
        std::memcpy(a.buffer.host + from, w.data(), w.size());
        const abi::local src = a.local(static_cast<std::int64_t>(from), bytes);
        psns.write(a, abi::SQ_BASE_WQE_TYPE_WRITE_WQE, bytes);
        a.post({abi::write_op{std::span(&src, 1), b.remote(static_cast<std::int64_t>(to))}, true});
        const auto e = a.next(a.scq, 5000ms);
        REQUIRE(e);
        REQUIRE(as_req(*e).status == abi::CQ_REQ_STATUS_OK);
        CHECK(as_req(*e).sq_cons_idx == (i + 1) % sq_entries);
        a.consumed(a.scq);
        REQUIRE(same_bytes(b.buffer.host + to, w));
        ++done;
    }
    p.wire.set_faults({});
    INFO(done << " WRITEs, " << p.wire.counters().dropped << " frames dropped, "
              << a.dp().retransmissions_located() << " retransmissions located");
    CHECK(p.wire.counters().dropped > 0);
    CHECK(a.dp().retransmissions_located() >= 3);
    CHECK(a.dp().retransmissions_refused() == 0);
    CHECK(a.queried_state() == abi::CMDQ_MODIFY_QP_NEW_STATE_RTS);
}

TEST_CASE("bnxt model retransmissions: a wrong PSN search entry for a WQE whose packets are lost fails it "
          "LOCAL_QP_OPERATION_ERR, the QP goes to ERR with a QP_ERROR_NOTIFICATION",
          "[bnxt_model][datapath][retransmit]") {
    enum class wrong { start_psn, next_psn, opcode };
    const wrong what = GENERATE(wrong::start_psn, wrong::next_psn, wrong::opcode);
    CAPTURE(static_cast<int>(what));
    bnxt_pair p;
    auto& a = p.a;
    auto& b = p.b;
    psn_writer psns;
    // WQE 0 with its entry right, no loss: OK
    const std::string w0 = pattern(2048, 'x');
    std::memcpy(a.buffer.host, w0.data(), w0.size());
    const abi::local src0 = a.local(0, 2048);
    psns.write(a, abi::SQ_BASE_WQE_TYPE_WRITE_WQE, 2048);
    a.post({abi::write_op{std::span(&src0, 1), b.remote(0)}, true});
    auto e = a.next(a.scq);
    REQUIRE(e);
    CHECK(as_req(*e).status == abi::CQ_REQ_STATUS_OK);
    a.consumed(a.scq);

    // WQE 1, three packets, all lost; its entry says another PSN range or another opcode
    const std::string w1 = pattern(3000, 'y');
    std::memcpy(a.buffer.host + 4096, w1.data(), w1.size());
    const abi::local src1 = a.local(4096, 3000);
    psns.write(a, abi::SQ_BASE_WQE_TYPE_WRITE_WQE, 3000, what == wrong::start_psn ? 1 : 0,
               what == wrong::next_psn ? 1 : 0,
               what == wrong::opcode ? std::optional<std::uint8_t>(abi::SQ_BASE_WQE_TYPE_SEND) : std::nullopt);
    lose(p.wire, 3, [&] { a.post({abi::write_op{std::span(&src1, 1), b.remote(8192)}, true}); });
    // the ack timer (64 ms at timeout 14) goes off: the retransmission cannot be located
    e = a.next(a.scq, 5000ms);
    REQUIRE(e);
    CHECK(as_req(*e).status == abi::CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR);
    CHECK(as_req(*e).sq_cons_idx == 2);
    CHECK(as_req(*e).qp_handle == a.qp_handle);
    const auto note = qp_error_of(a);
    CHECK(note.req_err_state_reason == abi::CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_RETX_SETUP_ERROR);
    CHECK(a.queried_state() == abi::CMDQ_MODIFY_QP_NEW_STATE_ERR);
    CHECK(a.dp().retransmissions_refused() == 1);
    CHECK(a.dp().retransmissions_located() == 0);
    CHECK_FALSE(same_bytes(b.buffer.host + 8192, w1));   // never sent again
}

TEST_CASE("bnxt model retransmissions: a WQE whose entry leaves out the PSN it is sent again from fails when lost; "
          "the same entry without loss goes unnoticed",
          "[bnxt_model][datapath][retransmit]") {
    const bool loss = GENERATE(false, true);
    CAPTURE(loss);
    bnxt_pair p;
    auto& a = p.a;
    auto& b = p.b;
    psn_writer psns;
    const std::string w = pattern(3000, 'z');
    std::memcpy(a.buffer.host, w.data(), w.size());
    const abi::local src = a.local(0, 3000);
    // start_psn one late: the WQE's first packet is outside its own entry
    psns.write(a, abi::SQ_BASE_WQE_TYPE_WRITE_WQE, 3000, 1);
    const auto post = [&] { a.post({abi::write_op{std::span(&src, 1), b.remote(4096)}, true}); };
    if (loss) {
        lose(p.wire, 3, post);
    } else {
        post();
    }
    const auto e = a.next(a.scq, 5000ms);
    REQUIRE(e);
    if (!loss) {
        // as on a card: no retransmission, the entry is never read
        CHECK(as_req(*e).status == abi::CQ_REQ_STATUS_OK);
        CHECK(as_req(*e).sq_cons_idx == 1);
        CHECK(same_bytes(b.buffer.host + 4096, w));
        a.passes(20);
        CHECK(a.queried_state() == abi::CMDQ_MODIFY_QP_NEW_STATE_RTS);
        CHECK(a.dp().retransmissions_refused() == 0);
        CHECK(a.dp().retransmissions_located() == 0);
        CHECK_FALSE(a.r.ch.next(100ms).has_value());   // no QP_ERROR_NOTIFICATION
    } else {
        CHECK(as_req(*e).status == abi::CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR);
        CHECK(as_req(*e).sq_cons_idx == 1);
        CHECK(qp_error_of(a).req_err_state_reason ==
              abi::CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_RETX_SETUP_ERROR);
        CHECK(a.queried_state() == abi::CMDQ_MODIFY_QP_NEW_STATE_ERR);
        CHECK(a.dp().retransmissions_refused() == 1);
    }
}
