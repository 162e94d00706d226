// Ring bookkeeping (qp/ring.hpp) and the mlx5 queues' use of it: completion order, unsignaled
// entries, failure and flush order, receive entries and their counter (docs/guide.md, "The queue
// pair contract"; rdma-core providers/mlx5/qp.c mlx5_post_recv, cq.c).
#include <catch2/catch.hpp>

#include <array>
#include <cstring>

#include "abi/bits.hpp"
#include "qp/mlx5/completion_queue.hpp"
#include "qp/mlx5/receive_queue.hpp"
#include "qp/mlx5/send_queue.hpp"
#include "qp/ring.hpp"
#include "test/unit/qp_mlx5/memory.hpp"

namespace abi = rig::mlx5::abi;
using rig::qp::entry_error;
using rig::qp::entry_result;
using rig::qp::ring;
using rig::test::aligned_bytes;

namespace {

const entry_error remote_access{"remote access error", 0x13, 0, false};

entry_result ok(std::uint32_t n) { return entry_result{n}; }

abi::completion cqe(abi::cqe_opcode op, std::uint16_t counter, std::uint8_t syndrome = 0,
                    std::uint32_t bytes = 0) {
    abi::completion c{};
    c.opcode = op;
    c.qpn = 9;
    c.wqe_counter = counter;
    c.byte_count = bytes;
    c.syndrome = syndrome;
    c.error = syndrome != 0 ? abi::cqe_error_from_syndrome(syndrome) : abi::cqe_error::none;
    return c;
}

struct send_fixture {
    send_fixture() : sq_ring(64 * 64), record(8), uar(4096), reg(uar.data() + 0x800, 256),
                     sq({sq_ring.span(), record.span(), &reg}, 9) {}
    aligned_bytes sq_ring, record, uar;
    rig::qp::mlx5::bfreg reg;
    rig::qp::mlx5::send_queue sq;
    void post(std::int64_t bytes, bool signal) {
        sq.post(abi::write_op{{0x1000, bytes, 1}, {0x2000, 2}}, signal);
    }
};

}  // namespace

TEST_CASE("ring: results are taken in entry order; a later one waits for the earlier") {
    ring r(8, 8);
    r.push(10);
    r.push(20);
    r.push(30);
    CHECK_FALSE(r.take().has_value());   // nothing completed yet
    r.complete_through(0, std::nullopt);
    CHECK(r.take() == ok(10));
    CHECK_FALSE(r.take().has_value());
    r.complete_through(2, 31u);          // entry 2's completion also completes entry 1
    CHECK(r.take() == ok(20));
    CHECK(r.take() == ok(31));           // a receive's length comes from its completion
    CHECK_FALSE(r.take().has_value());   // no entry due
    CHECK(r.room() == 8);
}

TEST_CASE("ring: room counts entries posted and not taken; full refuses and changes nothing") {
    ring r(4, 3);   // a ring that keeps one slot free (bnxt)
    r.push(1);
    r.push(2);
    r.push(3);
    CHECK(r.room() == 0);
    CHECK_THROWS_AS(r.push(4), std::invalid_argument);
    CHECK(r.posted() == 3);
    r.complete_through(2, std::nullopt);
    CHECK(r.room() == 0);   // completed is not free: taken is
    CHECK(r.take() == ok(1));
    CHECK(r.room() == 1);
    CHECK_THROWS_AS(ring(6, 6), std::invalid_argument);
    CHECK_THROWS_AS(ring(8, 9), std::invalid_argument);
}

TEST_CASE("ring: failure keeps earlier results, failing entry carries its error, rest flushed") {
    ring r(8, 8);
    for (std::uint32_t i = 0; i < 5; ++i) {
        r.push(100 + i);
    }
    r.complete_through(0, std::nullopt);
    r.fail_at(2, remote_access);          // entry 1 completed before it (unsignaled)
    CHECK(r.failed());
    r.push(200);                          // posted after the failure
    r.complete_through(4, std::nullopt);  // what arrives after the failure changes nothing
    r.fail_at(3, entry_error{"other", 1, 0, false});
    CHECK(r.take() == ok(100));
    CHECK(r.take() == ok(101));
    const auto failing = r.take();
    REQUIRE(failing.has_value());
    REQUIRE_FALSE(failing->has_value());
    CHECK(failing->error() == remote_access);
    entry_error flushed = remote_access;
    flushed.flushed = true;
    for (int i = 0; i < 3; ++i) {         // entries 3, 4 and the one posted after
        const auto e = r.take();
        REQUIRE(e.has_value());
        REQUIRE_FALSE(e->has_value());
        CHECK(e->error() == flushed);
    }
    CHECK_FALSE(r.take().has_value());
    r.push(300);                          // a failed ring stays failed
    CHECK(r.take() == entry_result{std::unexpect, flushed});
}

TEST_CASE("ring: a failure from outside fails every entry without a result") {
    ring r(8, 8);
    r.push(1);
    r.push(2);
    r.complete_through(0, std::nullopt);
    const entry_error nic{"queue pair failed (NIC event)", 0, 0, false};
    r.fail(nic);
    CHECK(r.take() == ok(1));
    entry_error flushed = nic;
    flushed.flushed = true;
    CHECK(r.take() == entry_result{std::unexpect, flushed});
}

TEST_CASE("send queue: unsignaled entries complete when a later signaled CQE names it") {
    send_fixture f;
    for (int i = 0; i < 8; ++i) {
        f.post(64 + i, i == 7);   // only the last asks for a completion
    }
    CHECK_FALSE(f.sq.poll().has_value());
    f.sq.complete(cqe(abi::cqe_opcode::req, 7));
    for (std::uint32_t i = 0; i < 8; ++i) {
        CHECK(f.sq.poll() == ok(64 + i));
    }
    CHECK_FALSE(f.sq.poll().has_value());
}

TEST_CASE("send queue: an error CQE fails its entry, flushes the rest, later posts flushed") {
    send_fixture f;
    for (int i = 0; i < 4; ++i) {
        f.post(10, true);
    }
    f.sq.complete(cqe(abi::cqe_opcode::req, 0));
    f.sq.complete(cqe(abi::cqe_opcode::req_err, 1, 0x13));
    f.sq.complete(cqe(abi::cqe_opcode::req_err, 2, 0x05));   // the NIC's flush CQEs
    f.sq.complete(cqe(abi::cqe_opcode::req_err, 3, 0x05));
    f.post(10, true);
    CHECK(f.sq.failed());
    CHECK(f.sq.poll() == ok(10));
    const entry_error own{"remote access error", 0x13, 0, false};
    CHECK(f.sq.poll() == entry_result{std::unexpect, own});
    entry_error flushed = own;
    flushed.flushed = true;
    for (int i = 0; i < 3; ++i) {
        CHECK(f.sq.poll() == entry_result{std::unexpect, flushed});
    }
    CHECK_FALSE(f.sq.poll().has_value());
}

TEST_CASE("send queue: a flush CQE first is not the entry's own failure; the queue pair's failure is adopted") {
    // the other ring's entry failed (its CQE in the other CQ, taken later): this ring first sees
    // only the NIC's flush CQE for its entry 1
    send_fixture f;
    for (int i = 0; i < 3; ++i) {
        f.post(10, true);
    }
    f.sq.complete(cqe(abi::cqe_opcode::req, 0));
    f.sq.complete(cqe(abi::cqe_opcode::req_err, 1, 0x05));
    CHECK(f.sq.failed());
    CHECK_FALSE(f.sq.entries().failed_itself());
    const entry_error local_length{"local length error", 0x01, 0, false};
    f.sq.adopt_failure(local_length);
    f.sq.complete(cqe(abi::cqe_opcode::req_err, 2, 0x05));
    CHECK(f.sq.poll() == ok(10));
    entry_error carried = local_length;
    carried.flushed = true;
    CHECK(f.sq.poll() == entry_result{std::unexpect, carried});
    CHECK(f.sq.poll() == entry_result{std::unexpect, carried});
    // a ring whose own entry failed keeps its own failure
    send_fixture g;
    g.post(10, true);
    g.post(10, true);
    g.sq.complete(cqe(abi::cqe_opcode::req_err, 0, 0x13));
    g.sq.adopt_failure(local_length);
    CHECK(g.sq.poll() == entry_result{std::unexpect, remote_access});
    entry_error own_flushed = remote_access;
    own_flushed.flushed = true;
    CHECK(g.sq.poll() == entry_result{std::unexpect, own_flushed});
}

TEST_CASE("send queue: a completion it does not take fails the ring") {
    SECTION("a responder opcode") {
        send_fixture f;
        f.post(10, true);
        f.sq.complete(cqe(abi::cqe_opcode::resp_send, 0));
        CHECK(f.sq.failed());
        const auto e = f.sq.poll();
        REQUIRE(e.has_value());
        CHECK(e->error().what == rig::qp::mlx5::unexpected_completion().what);
    }
    SECTION("a counter naming no outstanding entry") {
        send_fixture f;
        f.post(10, true);
        f.sq.complete(cqe(abi::cqe_opcode::req, 5));
        CHECK(f.sq.failed());
    }
}

TEST_CASE("receive queue: entries at stride, counter record, lengths from the CQE") {
    aligned_bytes rq_ring(16 * 32), record(8);
    rig::qp::mlx5::receive_queue rq({rq_ring.span(), 32, record.span()});
    CHECK(rq.slots() == 16);
    for (std::int64_t i = 0; i < 20; ++i) {
        rq.post(abi::local{0x4000 + i * 0x100, 0x100, 5});
        rq.ring();
        CHECK(rig::abi::load_be<std::uint32_t>(record.data()) == static_cast<std::uint32_t>(i + 1));
        // the entry as abi writes it, at slot i % 16
        std::array<std::byte, 32> expect{};
        const abi::local l{0x4000 + i * 0x100, 0x100, 5};
        abi::write_receive(expect, 0, 32, std::span<const abi::local>(&l, 1));
        CHECK(std::memcmp(rq_ring.data() + (i % 16) * 32, expect.data(), 32) == 0);
        rq.complete(cqe(abi::cqe_opcode::resp_send, static_cast<std::uint16_t>(i), 0,
                        static_cast<std::uint32_t>(i)));
        CHECK(rq.poll() == ok(static_cast<std::uint32_t>(i)));
    }
    CHECK(rig::abi::load_be<std::uint32_t>(record.data() + 4) == 0);   // send word untouched
    for (int i = 0; i < 16; ++i) {
        rq.post(abi::local{0x4000, 8, 5});
    }
    CHECK_THROWS_AS(rq.post(abi::local{0x4000, 8, 5}), std::invalid_argument);
    rq.complete(cqe(abi::cqe_opcode::resp_err, 20, 0x01));   // local length: message too long
    const auto e = rq.poll();
    REQUIRE(e.has_value());
    CHECK(e->error().what == "local length error");
    CHECK(rq.failed());
}

TEST_CASE("ring: a 16-bit counter names the right entry across the 65536 wrap") {
    ring r(8, 8);
    // bring the counts to 65530 entries posted and taken
    for (std::uint32_t i = 0; i < 65530; ++i) {
        r.push(1);
        r.complete_through(i, std::nullopt);
        REQUIRE(r.take() == ok(1));
    }
    for (std::uint32_t i = 0; i < 8; ++i) {
        r.push(i);   // entries 65530 .. 65537
    }
    CHECK(r.resolve(65530 & 0xffff, 16) == std::optional<std::uint64_t>{65530});
    CHECK(r.resolve(1, 16) == std::optional<std::uint64_t>{65537});   // 65537 & 0xffff
    CHECK_FALSE(r.resolve(2, 16).has_value());                        // not posted yet
    CHECK_FALSE(r.resolve(65529, 16).has_value());                    // already completed
    r.complete_through(*r.resolve(1, 16), std::nullopt);
    for (std::uint32_t i = 0; i < 8; ++i) {
        CHECK(r.take() == ok(i));
    }
}

TEST_CASE("completion queue to send queue: polled CQEs complete the entries they name") {
    send_fixture f;
    aligned_bytes cq_ring(8 * 64), cq_record(8);
    rig::qp::mlx5::completion_queue cq({cq_ring.span(), cq_record.span(), f.uar.data()}, 3);
    for (std::size_t i = 0; i < 8; ++i) {
        cq_ring.data()[i * 64 + abi::cqe_offset::op_own] = std::byte{0xf1};
    }
    for (int i = 0; i < 4; ++i) {
        f.post(100 + i, i % 2 == 1);   // entries 1 and 3 signaled
    }
    abi::completion first = cqe(abi::cqe_opcode::req, 1);
    abi::completion second = cqe(abi::cqe_opcode::req_err, 3, 0x15);
    abi::encode(std::span<std::byte, 64>(cq_ring.data(), 64), first);
    abi::encode(std::span<std::byte, 64>(cq_ring.data() + 64, 64), second);
    abi::completion c;
    while (cq.poll(c)) {
        REQUIRE(c.qpn == 9);
        f.sq.complete(c);
    }
    CHECK(cq.consumer_index() == 2);
    CHECK(f.sq.poll() == ok(100));
    CHECK(f.sq.poll() == ok(101));
    CHECK(f.sq.poll() == ok(102));   // unsignaled, before the failing one: it succeeded
    const auto failed = f.sq.poll();
    REQUIRE(failed.has_value());
    CHECK(failed->error().what == "transport retry counter exceeded");
    CHECK(failed->error().syndrome == 0x15);
    CHECK_FALSE(failed->error().flushed);
}
