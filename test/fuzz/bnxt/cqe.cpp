// Fuzzes the bnxt driver's completion path (qp/bnxt/data_path.hpp, queues.cpp) as a hostile
// device drives it: one queue pair's data path over plain memory (its SQ, RQ, both CQ rings and
// its doorbell words), entries posted by the driver's own post_send/post_receive, then CQEs the
// fuzzer writes into the CQ rings (any type, status, qp_handle, sq_cons_idx, wr_id, length, flags,
// a toggle right or wrong, at the producer or in any slot), take_completions() and take() as
// rig::queue_pair calls them, and the NIC's QP_ERROR_NOTIFICATION code or the machine's failure.
// Oracle (qp/ring.hpp's contract; roce_hsi.h cq_req, cq_res_rc): every CQE the driver takes becomes
// an entry's result or a named error; results come only for posted entries, in entry order, at most
// one each; a send's success carries its posted length; once a ring yields an error, every later
// result of it is an error (flushed); the CQ doorbell the driver rings names its CQ and its
// consumer (index and epoch, roce_hsi.h dbc_dbc); the rings are exact-sized heap blocks, so an
// index outside them is an AddressSanitizer report.
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "test/fuzz/harness.hpp"
#include "test/fuzz/reader.hpp"
#include "qp/bnxt/data_path.hpp"

namespace {

namespace abi = ::rig::bnxt::abi;
namespace qb = ::rig::qp::bnxt;
using rig::fuzz::reader;

// An exact-sized, 64-byte aligned block: one byte past it is an ASan report.
struct block {
    struct release {
        void operator()(std::byte* b) const noexcept { ::operator delete(b, std::align_val_t{64}); }
    };
    std::unique_ptr<std::byte, release> p;
    std::size_t size;
    explicit block(std::size_t n) : p(static_cast<std::byte*>(::operator new(n, std::align_val_t{64}))), size(n) {
        std::memset(p.get(), 0, n);
    }
    std::span<std::byte> span() const noexcept { return {p.get(), size}; }
};

constexpr std::uint32_t qpn = 0x1234, send_cqn = 0x51, receive_cqn = 0x52;
constexpr std::uint64_t qp_handle = 0x9900000000000101ull;
constexpr std::uint32_t lkey = 0x77;

// The device's side of one CQ: where it writes next (free-running, as the model's producer).
struct device_cq {
    block& ring;
    std::uint32_t entries;
    std::uint32_t producer = 0;
};

// What the harness posted on one ring, and what it has taken so far.
struct ledger {
    std::vector<std::uint32_t> lengths;   // by entry number
    std::uint64_t taken = 0;
    bool errored = false;
};

struct fixture {
    std::uint32_t sq_n, rq_n, scq_n, rcq_n;
    block sq, psn, rq, scq, rcq, doorbells;
    qb::data_path dp;
    device_cq send_dev, receive_dev;
    ledger sends, receives;
    std::atomic<std::uint8_t> nic_event{0};

    fixture(std::uint32_t s, std::uint32_t r, std::uint32_t sc, std::uint32_t rc)
        : sq_n(s), rq_n(r), scq_n(sc), rcq_n(rc), sq(std::size_t{s} * qb::wqe_bytes), psn(std::size_t{s} * 16),
          rq(std::size_t{r} * qb::wqe_bytes), scq(std::size_t{sc} * abi::cqe_size), rcq(std::size_t{rc} * abi::cqe_size),
          doorbells(qb::doorbell_word::block_bytes), dp(memory()), send_dev{scq, sc}, receive_dev{rcq, rc} {
        dp.start_sends(0x100, 1024);
    }
    qb::data_path_memory memory() {
        qb::data_path_memory m;
        std::byte* db = doorbells.p.get();
        m.send = {sq.span(), psn.span(), db + qb::doorbell_word::sq};
        m.receive = {rq.span(), db + qb::doorbell_word::rq};
        m.send_cq = {scq.span(), db + qb::doorbell_word::send_cq, db + qb::doorbell_word::send_cq_arm};
        m.receive_cq = {rcq.span(), db + qb::doorbell_word::receive_cq, db + qb::doorbell_word::receive_cq_arm};
        m.qpn = qpn;
        m.qp_handle = qp_handle;
        m.send_cqn = send_cqn;
        m.receive_cqn = receive_cqn;
        return m;
    }
    std::uint64_t word(std::size_t at) const {
        std::uint64_t v;
        std::memcpy(&v, doorbells.p.get() + at, 8);
        return v;
    }
};

// Posts up to `count` sends (or receives) of fuzz-chosen lengths, within the ring's room.
void post(fixture& f, reader& in, bool send, std::uint32_t count) {
    for (std::uint32_t i = 0; i < count && f.dp.room(send) > 0; ++i) {
        const std::uint32_t bytes = in.u8() * 37u;
        const std::uint64_t at = 0x7f0000000000ull + 4096u * i;
        if (send) {
            switch (in.u8() % 3) {
            case 0: f.dp.post_send(at, bytes, lkey, 0); break;
            case 1: f.dp.post_write(at, bytes, lkey, {0x7e0000000000ull, 0x99}, 0); break;
            default: f.dp.post_read({0x7e0000000000ull, 0x99}, at, bytes, lkey, 0); break;
            }
            f.sends.lengths.push_back(bytes);
        } else {
            f.dp.post_receive(at, bytes, lkey, 0);
            f.receives.lengths.push_back(bytes);
        }
    }
    f.dp.ring(send);
}

// One CQE as the device writes it: `shape` says which fields the fuzzer's bytes keep raw.
//  bit 0: toggle right for the slot's pass   bit 1: our qp_handle   bits 2-3: REQ, RES_RC,
//  TERMINAL or raw type   bit 4: sq_cons_idx / wr_id near the driver's entries   bit 5: at the
//  producer (else in the slot the next byte names, the producer unmoved).
void write_cqe(fixture& f, device_cq& d, const qb::completion_queue& cq, reader& in) {
    const std::uint8_t shape = in.u8();
    std::array<std::byte, abi::cqe_size> e{};
    in.fill({e.data(), e.size()});
    const bool at_producer = (shape & 0x20) != 0;
    const std::uint32_t slot = at_producer ? d.producer % d.entries : in.u8() % d.entries;
    const std::uint8_t type_pick = (shape >> 2) & 3;
    std::uint8_t type = static_cast<std::uint8_t>((std::to_integer<unsigned>(e[24]) >> 1) & 0xf);
    if (type_pick == 1) {
        type = abi::CQ_BASE_CQE_TYPE_REQ;
    } else if (type_pick == 2) {
        type = abi::CQ_BASE_CQE_TYPE_RES_RC;
    } else if (type_pick == 3) {
        type = abi::CQ_BASE_CQE_TYPE_TERMINAL;
    }
    std::uint8_t toggle = std::to_integer<std::uint8_t>(e[24]) & 1;
    if ((shape & 1) != 0) {
        const std::uint32_t pass = at_producer ? d.producer / d.entries : cq.consumer_index() / d.entries;
        toggle = (pass & 1) == 0 ? 1 : 0;
    }
    e[24] = std::byte{static_cast<std::uint8_t>((std::to_integer<unsigned>(e[24]) & ~0x1fu) | (type << 1) | toggle)};
    const bool res = type == abi::CQ_BASE_CQE_TYPE_RES_RC;
    if ((shape & 2) != 0) {
        rig::abi::store_le<std::uint64_t>(e.data() + (res ? 8 : 0), qp_handle);
    }
    if ((shape & 0x10) != 0) {
        // near what the driver posted: a small step from the entries already taken
        const std::uint32_t step = std::to_integer<std::uint8_t>(e[30]) % 8;
        if (res) {
            const std::uint32_t wr_id = static_cast<std::uint32_t>(f.receives.taken + step) & 0xfffff;
            rig::abi::store_le<std::uint32_t>(e.data() + 28, wr_id);
        } else {
            rig::abi::store_le<std::uint16_t>(e.data() + 8, static_cast<std::uint16_t>(f.sends.taken + 1 + step));
        }
    }
    std::memcpy(d.ring.p.get() + std::size_t{slot} * abi::cqe_size, e.data(), e.size());
    if (at_producer) {
        ++d.producer;
    }
}

// The CQ doorbell the driver last rang: its CQ and its consumer, index and epoch.
void check_cq_doorbell(const fixture& f, std::size_t at, std::uint32_t cqn, const qb::completion_queue& cq,
                       std::uint8_t type) {
    const std::uint64_t v = f.word(at);
    if (v == 0) {
        return;   // never rung
    }
    const abi::dbc_dbc d = abi::doorbell_fields(v);
    rig::fuzz::require(d.type == type && d.xid == cqn && d.path == abi::DBC_DBC_PATH_ROCE && d.valid == 1,
                       "a CQ doorbell names its CQ, type and the RoCE path");
    const std::uint32_t n = cq.size();
    rig::fuzz::require(d.index < n, "a CQ doorbell's index lies in the ring");
    if (type == abi::DBC_DBC_TYPE_CQ) {
        const std::uint32_t ci = cq.consumer_index();
        rig::fuzz::require(d.index == ci % n && d.epoch == ((ci / n) & 1),
                           "the consumer doorbell carries the consumer index and its pass");
    }
}

// Every result due on one ring, checked against what was posted.
void take_all(fixture& f, bool send) {
    ledger& l = send ? f.sends : f.receives;
    const rig::qp::ring& r = f.dp.entries(send);
    while (const auto result = f.dp.take(send)) {
        rig::fuzz::require(l.taken < l.lengths.size(), "a result only for an entry the driver posted");
        const std::uint32_t posted = l.lengths[l.taken];
        ++l.taken;
        rig::fuzz::require(r.taken() == l.taken, "one result per entry, in entry order");
        if (result->has_value()) {
            rig::fuzz::require(!l.errored, "after an error, every later result of the ring is an error");
            if (send) {
                rig::fuzz::require(**result == posted, "a send's success carries its posted length");
            }
        } else {
            rig::fuzz::require(!result->error().what.empty(), "an error names what went wrong");
            rig::fuzz::require(!l.errored || result->error().flushed, "after the failing entry, errors are flushes");
            l.errored = true;
        }
    }
    rig::fuzz::require(r.taken() <= r.posted() && r.completed() <= r.posted(), "the ring's counts stay within its posts");
}

void settle(fixture& f, bool machine_failed) {
    f.dp.take_completions(f.nic_event, machine_failed);
    check_cq_doorbell(f, qb::doorbell_word::send_cq, send_cqn, f.dp.scq, abi::DBC_DBC_TYPE_CQ);
    check_cq_doorbell(f, qb::doorbell_word::receive_cq, receive_cqn, f.dp.rcq, abi::DBC_DBC_TYPE_CQ);
    take_all(f, true);
    take_all(f, false);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    reader in{data, size};
    const std::uint8_t sizes = in.u8();
    const auto ring_of = [](unsigned bits) { return 2u << bits; };   // 2, 4, 8 or 16 entries
    fixture f(ring_of(sizes & 3), ring_of((sizes >> 2) & 3), ring_of((sizes >> 4) & 3), ring_of((sizes >> 6) & 3));
    post(f, in, true, in.u8() % 17);
    post(f, in, false, in.u8() % 17);
    for (int round = 0; round < 256 && !in.empty(); ++round) {
        const std::uint8_t op = in.u8();
        switch (op % 8) {
        case 0:
        case 1:
        case 2: write_cqe(f, f.send_dev, f.dp.scq, in); break;
        case 3: write_cqe(f, f.receive_dev, f.dp.rcq, in); break;
        case 4: settle(f, false); break;
        case 5: post(f, in, (op & 0x10) != 0, in.u8() % 9); break;
        case 6: {
            // the NIC's QP_ERROR_NOTIFICATION (a code, 0: none) or the machine's failure
            f.nic_event.store(in.u8(), std::memory_order_relaxed);
            settle(f, (op & 0x10) != 0);
            break;
        }
        default: {
            const bool send = (op & 0x10) != 0;
            f.dp.arm(send);
            check_cq_doorbell(f, send ? qb::doorbell_word::send_cq_arm : qb::doorbell_word::receive_cq_arm,
                              send ? send_cqn : receive_cqn, send ? f.dp.scq : f.dp.rcq, abi::DBC_DBC_TYPE_CQ_ARMALL);
            break;
        }
        }
    }
    settle(f, false);
    return 0;
}
