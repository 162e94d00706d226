// Fuzzes the mlx5 driver's completion path (qp/mlx5/data_path.hpp take_completions, over
// completion_queue::poll, send_queue::complete and receive_queue::complete in queues.cpp): the
// CQEs a hostile or buggy device writes, over plain memory as test/unit/qp_mlx5/ does. One
// queue pair per input (ring sizes from the first bytes), then records of (op, fields): post
// sends/receives, ring, the "device" writes a CQE (well formed at its producer slot with the
// right owner bit, or 64 raw bytes at any slot: owner-bit games, stale or foreign entries),
// take_completions (with or without a NIC failure event), take results, arm.
// Oracle: every CQE the poll consumes is one the owner rule hands to software, and the
// consumer-index record says where the poll stopped; a CQE of another QP, of the other side or
// of an opcode mlx5dv.h does not name fails the ring (never a result); results come only for
// posted entries, in order, a send's success carrying its posted length; once a ring's result is
// an error every later one is, each naming what went wrong; ring counts stay consistent. Memory
// is allocated at its exact size, so ASan reports any access outside a ring.
#include <array>
#include <atomic>
#include <cstring>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "qp/mlx5/data_path.hpp"  // first: see its comment
#include "test/fuzz/harness.hpp"
#include "test/fuzz/reader.hpp"

namespace {

namespace abi = rig::mlx5::abi;
using rig::fuzz::require;
using rig::qp::mlx5::completion_queue;

// `n` bytes, 4 KiB aligned, exactly `n` long for ASan (no rounding up as aligned_alloc's).
struct exact_bytes {
    explicit exact_bytes(std::size_t size, std::byte fill = std::byte{0})
        : n(size), p(static_cast<std::byte*>(::operator new(size, std::align_val_t{4096}))) {
        std::memset(p, static_cast<int>(fill), n);
    }
    ~exact_bytes() { ::operator delete(p, std::align_val_t{4096}); }
    exact_bytes(const exact_bytes&) = delete;
    exact_bytes& operator=(const exact_bytes&) = delete;
    std::span<std::byte> span() const noexcept { return {p, n}; }
    std::size_t n;
    std::byte* p;
};

constexpr std::uint32_t our_qpn = 0x1234;
constexpr std::byte invalid_op_own{0xf0};  // opcode INVALID, owner 0: as the driver initialises a CQ

// What the harness knows of one ring: the length of each posted entry and the results taken.
struct ring_shadow {
    std::vector<std::uint32_t> lengths;  // by entry number
    std::uint64_t results = 0;
    bool saw_error = false;
};

// The device's side of one CQ: where it writes next.
struct cq_device {
    std::span<std::byte> ring;
    std::uint32_t log_size;
    std::uint32_t producer = 0;
    std::span<std::byte, abi::cqe_size> slot(std::uint32_t i) const {
        return std::span<std::byte, abi::cqe_size>(ring.data() + (i & ((1u << log_size) - 1)) * abi::cqe_size,
                                                   abi::cqe_size);
    }
};

struct queue_pair {
    queue_pair(std::uint32_t log_sq, std::uint32_t log_rq, std::uint32_t log_scq, std::uint32_t log_rcq)
        : sq_ring(abi::entry_size << log_sq), rq_ring(std::size_t{32} << log_rq),
          scq_ring(abi::cqe_size << log_scq), rcq_ring(abi::cqe_size << log_rcq), qp_record(8), scq_record(8),
          rcq_record(8), uar(4096), bf(uar.p + 0x800, 256), dp(memory()), scq_dev{scq_ring.span(), log_scq}, rcq_dev{rcq_ring.span(), log_rcq} {}

    rig::qp::mlx5::data_path_memory memory() {
        for (exact_bytes* cq : {&scq_ring, &rcq_ring}) {
            for (std::size_t at = abi::cqe_offset::op_own; at < cq->n; at += abi::cqe_size) {
                cq->p[at] = invalid_op_own;
            }
        }
        return {.send = {sq_ring.span(), qp_record.span(), &bf},
                .receive = {rq_ring.span(), 32, qp_record.span()},
                .send_cq = {scq_ring.span(), scq_record.span(), uar.p},
                .receive_cq = {rcq_ring.span(), rcq_record.span(), uar.p},
                .qpn = our_qpn,
                .send_cqn = 1,
                .receive_cqn = 2};
    }

    exact_bytes sq_ring, rq_ring, scq_ring, rcq_ring, qp_record, scq_record, rcq_record, uar;
    rig::qp::mlx5::bfreg bf;
    rig::qp::mlx5::data_path dp;
    cq_device scq_dev, rcq_dev;
    ring_shadow send, receive;
};

void post_send(queue_pair& q, rig::fuzz::reader& in) {
    const std::uint8_t kind = in.u8();
    const std::uint32_t bytes = in.u16();
    const std::uint32_t key = in.u32();
    const rig::remote far{0x20000, 7};
    const std::uint64_t before = q.dp.sq.posted();
    const bool room = q.dp.room(true) != 0;
    std::uint32_t length = bytes;
    try {
        switch (kind % 4) {
        case 0: q.dp.post_send(0x10000, bytes, key, 0); break;
        case 1: q.dp.post_write(0x10000, bytes, key, far, 0); break;
        case 2: q.dp.post_read(far, 0x10000, bytes, key, 0); break;
        default: {
            const std::array<std::byte, abi::max_inline> data{};
            length = bytes % (abi::max_inline + 1);
            q.dp.post_write_inline(std::span(data).first(length), far, 0);
        }
        }
    } catch (const std::invalid_argument& e) {
        require(!room && q.dp.sq.posted() == before, "a post refused only for want of room, changing nothing");
        require(std::strlen(e.what()) != 0, "a refused post says why");
        return;
    }
    require(room && q.dp.sq.posted() == before + 1, "a post with room takes one entry");
    q.send.lengths.push_back(length);
}

void post_receive(queue_pair& q, rig::fuzz::reader& in) {
    const std::uint32_t bytes = in.u32() & 0x7fffffff;
    const std::uint64_t before = q.dp.rq.posted();
    const bool room = q.dp.room(false) != 0;
    try {
        q.dp.post_receive(0x30000, bytes, 5, 0);
    } catch (const std::invalid_argument&) {
        require(!room && q.dp.rq.posted() == before, "a receive refused only for want of room");
        return;
    }
    require(room && q.dp.rq.posted() == before + 1, "a receive with room takes one entry");
    q.receive.lengths.push_back(bytes);
}

// A CQE as a device that follows the owner rule writes it, with fuzzed contents: the opcode,
// the counter (near the next outstanding entry, or anything), the QPN (ours, mostly).
void device_writes(queue_pair& q, cq_device& dev, bool send_side, rig::fuzz::reader& in) {
    const std::uint8_t shape = in.u8();
    abi::completion c{};
    const std::uint8_t raw_opcode = in.u8();
    const abi::cqe_opcode usual = send_side ? ((shape & 1) ? abi::cqe_opcode::req_err : abi::cqe_opcode::req)
                                            : ((shape & 1) ? abi::cqe_opcode::resp_err : abi::cqe_opcode::resp_send);
    c.opcode = (shape & 2) ? static_cast<abi::cqe_opcode>(raw_opcode & 0xf) : usual;
    const rig::qp::ring& r = q.dp.entries(send_side);
    const std::uint16_t delta = in.u16();
    c.wqe_counter = (shape & 4) ? delta : static_cast<std::uint16_t>(r.completed() + (delta & 7));
    c.qpn = (shape & 8) ? in.u32() & 0xffffff : our_qpn;
    c.syndrome = in.u8();
    c.vendor_syndrome = in.u8();
    c.byte_count = in.u32();
    c.send_opcode = in.u8();
    c.owner = ((dev.producer >> dev.log_size) & 1) != 0;
    if (shape & 0x10) {
        c.owner = !c.owner;  // the wrong pass's owner bit: software must not take it
    }
    abi::encode(dev.slot(dev.producer), c);
    ++dev.producer;
}

// How many CQEs from the consumer index the owner rule hands to software, and whether one of
// them is of a kind the ring does not take (which must fail it).
struct scan {
    std::uint32_t count = 0;
    bool foreign = false;
};
scan scan_cq(const cq_device& dev, const completion_queue& cq, bool send_side) {
    scan s;
    std::uint32_t ci = cq.consumer_index();
    while (s.count <= (1u << dev.log_size) &&
           abi::cqe_is_software_owned(dev.slot(ci), ci, dev.log_size)) {
        const abi::completion c = abi::decode(dev.slot(ci));
        const bool ours_kind = send_side ? rig::qp::mlx5::is_send_side(c.opcode)
                                         : c.opcode == abi::cqe_opcode::resp_send || c.opcode == abi::cqe_opcode::resp_err;
        if (c.qpn != our_qpn || !ours_kind || c.error == abi::cqe_error::unknown) {
            s.foreign = true;
        }
        ++s.count;
        ++ci;
    }
    require(s.count <= (1u << dev.log_size), "the owner rule ends a poll within one pass of the ring");
    return s;
}

void check_record(const exact_bytes& record, const completion_queue& cq) {
    std::uint32_t word;
    std::memcpy(&word, record.p, 4);
    require(word == abi::cq_dbr_set_ci(cq.consumer_index()), "the set_ci record holds the consumer index");
}

void take_completions(queue_pair& q, rig::fuzz::reader& in) {
    const std::uint8_t how = in.u8();
    const std::uint8_t event = (how & 1) ? in.u8() : 0;
    const std::atomic<std::uint8_t> nic_event{event};
    const scan s = scan_cq(q.scq_dev, q.dp.scq, true);
    const scan r = scan_cq(q.rcq_dev, q.dp.rcq, false);
    const std::uint32_t sci = q.dp.scq.consumer_index();
    const std::uint32_t rci = q.dp.rcq.consumer_index();
    q.dp.take_completions(nic_event, (how & 2) != 0);
    require(q.dp.scq.consumer_index() == sci + s.count, "the send CQ takes exactly the CQEs software owns");
    require(q.dp.rcq.consumer_index() == rci + r.count, "the receive CQ takes exactly the CQEs software owns");
    check_record(q.scq_record, q.dp.scq);
    check_record(q.rcq_record, q.dp.rcq);
    require(!s.foreign || q.dp.sq.failed(), "a CQE the send ring does not take fails it");
    require(!r.foreign || q.dp.rq.failed(), "a CQE the receive ring does not take fails it");
    if (event != 0 && rig::qp::mlx5::is_failure_event(event)) {
        require(q.dp.sq.failed() && q.dp.rq.failed(), "a failure event fails both rings");
    }
}

void take_results(queue_pair& q, bool send_side) {
    ring_shadow& shadow = send_side ? q.send : q.receive;
    while (const auto result = q.dp.take(send_side)) {
        require(shadow.results < shadow.lengths.size(), "a result only for an entry that was posted");
        if (result->has_value()) {
            require(!shadow.saw_error, "no success after a ring's error");
            if (send_side) {
                require(**result == shadow.lengths[shadow.results], "a send's success carries its posted length");
            }
        } else {
            require(!result->error().what.empty(), "an error result names what went wrong");
            require(!shadow.saw_error || result->error().flushed, "after the failing entry, entries are flushed");
            shadow.saw_error = true;
        }
        ++shadow.results;
    }
    const rig::qp::ring& r = q.dp.entries(send_side);
    require(r.taken() == shadow.results && r.taken() <= r.posted() && r.completed() <= r.posted() &&
                r.posted() == shadow.lengths.size(),
            "ring counts agree: taken <= posted, completed <= posted");
    require(r.room() == r.capacity() - (r.posted() - r.taken()), "room is capacity less entries not taken");
}

void step(queue_pair& q, rig::fuzz::reader& in) {
    const std::uint8_t op = in.u8();
    switch (op % 9) {
    case 0: post_send(q, in); break;
    case 1: post_receive(q, in); break;
    case 2: q.dp.ring((op & 0x10) != 0); break;
    case 3: device_writes(q, q.scq_dev, true, in); break;
    case 4: device_writes(q, q.rcq_dev, false, in); break;
    case 5: {  // raw bytes at any slot of either CQ: torn, stale or forged entries
        cq_device& dev = (op & 0x10) ? q.scq_dev : q.rcq_dev;
        in.fill(dev.slot(in.u8()));
        break;
    }
    case 6: take_completions(q, in); break;
    case 7:
        take_results(q, true);
        take_results(q, false);
        break;
    default:
        q.dp.arm((op & 0x10) != 0);
        if (op & 0x20) {
            q.dp.event((op & 0x10) != 0);
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    rig::fuzz::reader in(data, size);
    const std::uint8_t sizes = in.u8();
    // 2..16 send entries, 2..4 receive slots... small rings, so that counters and owner bits wrap
    queue_pair q(1u + (sizes & 3), 1u + (sizes >> 2 & 1), 1u + (sizes >> 3 & 3), 1u + (sizes >> 5 & 3));
    for (unsigned n = 0; n < 512 && !in.empty(); ++n) {
        step(q, in);
    }
    take_results(q, true);
    take_results(q, false);
    return 0;
}
