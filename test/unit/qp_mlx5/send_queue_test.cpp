// The mlx5 send queue over plain memory: entry bytes and places, doorbell record, BlueFlame
// register writes, room and refusals (rdma-core providers/mlx5/qp.c
// _mlx5_post_send, post_send_db).
#include <catch2/catch.hpp>

#include <array>
#include <cstring>
#include <vector>

#include "abi/bits.hpp"
#include "qp/mlx5/send_queue.hpp"
#include "test/unit/qp_mlx5/memory.hpp"

namespace abi = rig::mlx5::abi;
using rig::qp::mlx5::send_queue;
using rig::test::aligned_bytes;

namespace {

constexpr std::uint32_t qpn = 0x1234;
constexpr std::size_t bf = abi::uar::bf_offset;   // bfreg 0 of the UAR page
constexpr std::size_t half = 256;                 // log_bf_reg_size 9: two 256-byte halves

struct fixture {
    explicit fixture(std::size_t slots, rig::qp::mlx5::copy_rule rule = rig::qp::mlx5::copy_rule::never)
        : ring(slots * abi::entry_size, std::byte{0xee}), record(8), uar(abi::uar_page_size),
          bfr(uar.data() + bf, half, rule), sq({ring.span(), record.span(), &bfr}, qpn) {}
    aligned_bytes ring, record, uar;
    rig::qp::mlx5::bfreg bfr;
    send_queue sq;

    std::span<const std::byte> entry(std::uint64_t k) const {
        return ring.span().subspan((k % sq.slots()) * 64, 64);
    }
    std::uint32_t send_counter() const {
        return rig::abi::load_be<std::uint32_t>(record.data() + abi::qp_dbr::send_counter);
    }
    std::array<std::byte, 8> reg(std::size_t off) const {
        std::array<std::byte, 8> b;
        std::memcpy(b.data(), uar.data() + bf + off, 8);
        return b;
    }
};

abi::write_op write_of(std::uint64_t k) {
    const auto i = static_cast<std::int64_t>(k);
    return {{0x10000 + i * 64, 64, 0x77}, {0x900000 + i * 64, 0xabc}};
}

// What abi's writer alone puts in a block for entry number k.
std::array<std::byte, 64> expected_block(std::uint64_t k, const auto& op, bool signal) {
    std::array<std::byte, 64> b{};
    abi::write(b, 0, qpn, static_cast<std::int64_t>(k & 0xffff), op, signal);
    return b;
}

bool same(std::span<const std::byte> a, std::span<const std::byte> b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

TEST_CASE("send queue: each operation's bytes at its ring slot, as abi's writers give them") {
    fixture f(64);
    const abi::write_op w = write_of(0);
    const abi::write_inline_op wi{"twenty-eight bytes exactly!!", {0x5000, 0x42}};
    REQUIRE(wi.data.size() == abi::max_inline);
    const abi::read_op r{{0x6000, 0x43}, {0x7000, 4096, 0x44}};
    const abi::send_op s{{0x8000, 100, 0x45}};
    CHECK(f.sq.post(w, true) == 0);
    CHECK(f.sq.post(wi, false) == 1);
    CHECK(f.sq.post(r, true) == 2);
    CHECK(f.sq.post(s, false) == 3);
    CHECK(same(f.entry(0), expected_block(0, w, true)));
    CHECK(same(f.entry(1), expected_block(1, wi, false)));
    CHECK(same(f.entry(2), expected_block(2, r, true)));
    CHECK(same(f.entry(3), expected_block(3, s, false)));
    // the slot after the last one is untouched
    CHECK(f.entry(4)[0] == std::byte{0xee});
    // opcode and index in the ctrl segment's first word, big-endian
    CHECK(rig::abi::load_be<std::uint32_t>(f.entry(2).data()) == ((2u << 8) | 0x10));
    CHECK(f.sq.room() == 60);
}

TEST_CASE("send queue: wrap at 64 entries and the index's low 16 bits beyond 65536") {
    fixture f(64);
    std::uint64_t k = 0;
    // 70000 entries through a 64-slot ring: every posted entry lands at k % 64 with index k & 0xffff
    for (; k < 70000; ++k) {
        f.sq.post(write_of(k), true);
        REQUIRE(same(f.entry(k), expected_block(k, write_of(k), true)));
        // complete it so the ring has room again
        abi::completion c{};
        c.opcode = abi::cqe_opcode::req;
        c.qpn = qpn;
        c.wqe_counter = static_cast<std::uint16_t>(k & 0xffff);
        f.sq.complete(c);
        REQUIRE(f.sq.poll() == rig::qp::entry_result{64u});
    }
    f.sq.ring();
    CHECK(f.send_counter() == (70000u & 0xffff));
    const std::uint32_t w0 = rig::abi::load_be<std::uint32_t>(f.entry(69999).data());
    CHECK(w0 >> 8 == (69999u & 0xffff));
    CHECK(69999 % 64 == 47);   // slot 47
}

TEST_CASE("send queue: a 4096-entry ring wraps, posted bytes at slot k & 4095") {
    fixture f(4096);
    for (std::uint64_t k = 0; k < 4096; ++k) {
        f.sq.post(write_of(k), k % 64 == 63);
    }
    CHECK(f.sq.room() == 0);
    abi::completion c{};
    c.opcode = abi::cqe_opcode::req;
    c.qpn = qpn;
    c.wqe_counter = 4095;   // one signaled CQE covers every unsignaled entry before it
    f.sq.complete(c);
    for (int i = 0; i < 4096; ++i) {
        REQUIRE(f.sq.poll().has_value());
    }
    CHECK(f.sq.room() == 4096);
    for (std::uint64_t k = 4096; k < 4096 + 10; ++k) {
        f.sq.post(write_of(k), true);
    }
    for (std::uint64_t k = 4096; k < 4106; ++k) {
        CHECK(same(f.entry(k), expected_block(k, write_of(k), true)));
    }
    CHECK(same(f.entry(10), expected_block(10, write_of(10), false)));   // not yet overwritten
}

TEST_CASE("send queue: ring() writes the record then the last entry's 8 bytes, halves alternate") {
    fixture f(64);
    CHECK(f.send_counter() == 0);
    for (int i = 0; i < 3; ++i) {
        f.sq.post(write_of(static_cast<std::uint64_t>(i)), i == 2);
    }
    const std::array<std::byte, 8> none{};
    CHECK(f.reg(0) == none);   // posting alone rings nothing
    CHECK(f.sq.doorbell().offset() == 0);
    f.sq.ring();
    // record: be32(3)
    const std::array<std::byte, 4> be3{std::byte{0}, std::byte{0}, std::byte{0}, std::byte{3}};
    CHECK(std::memcmp(f.record.data() + 4, be3.data(), 4) == 0);
    CHECK(rig::abi::load_be<std::uint32_t>(f.record.data()) == 0);   // receive word untouched
    CHECK(same(f.reg(0), f.entry(2).first(8)));
    CHECK(f.reg(half) == none);
    CHECK(f.sq.doorbell().offset() == half);

    // a ring() with nothing new writes nothing
    f.sq.ring();
    CHECK(f.reg(half) == none);
    CHECK(f.sq.doorbell().offset() == half);

    // the next batch goes to the other half, then back to the first
    f.sq.post(write_of(3), true);
    f.sq.ring();
    CHECK(same(f.reg(half), f.entry(3).first(8)));
    CHECK(f.send_counter() == 4);
    f.sq.post(write_of(4), true);
    f.sq.post(write_of(5), true);
    f.sq.ring();
    CHECK(same(f.reg(0), f.entry(5).first(8)));
    CHECK(f.sq.doorbell().offset() == half);   // three doorbells: first, second, first half
    CHECK(f.send_counter() == 6);
    // ctrl bytes as the NIC reads them: index 5, RDMA WRITE, qpn, ds 3
    CHECK(rig::abi::load_be<std::uint32_t>(f.reg(0).data()) == ((5u << 8) | 0x08));
    CHECK(rig::abi::load_be<std::uint32_t>(f.reg(0).data() + 4) == ((qpn << 8) | 3));
}

TEST_CASE("send queue: room goes to 0, then a post is refused and changes nothing") {
    fixture f(64);
    for (std::uint64_t k = 0; k < 64; ++k) {
        CHECK(f.sq.room() == 64 - k);
        f.sq.post(write_of(k), false);
    }
    CHECK(f.sq.room() == 0);
    std::vector<std::byte> before(f.ring.data(), f.ring.data() + f.ring.n);
    CHECK_THROWS_AS(f.sq.post(write_of(64), true), std::invalid_argument);
    CHECK(f.sq.posted() == 64);
    CHECK(std::memcmp(before.data(), f.ring.data(), before.size()) == 0);
    // a completed but untaken entry still holds its slot
    abi::completion c{};
    c.opcode = abi::cqe_opcode::req;
    c.qpn = qpn;
    c.wqe_counter = 0;
    f.sq.complete(c);
    CHECK(f.sq.room() == 0);
    CHECK(f.sq.poll() == rig::qp::entry_result{64u});
    CHECK(f.sq.room() == 1);
}

TEST_CASE("send queue: an entry abi refuses changes neither ring nor counts") {
    fixture f(64);
    f.sq.post(write_of(0), true);
    std::vector<std::byte> before(f.ring.data(), f.ring.data() + f.ring.n);
    const abi::write_inline_op too_long{"twenty-nine bytes, one too many", {0x5000, 1}};
    CHECK_THROWS_AS(f.sq.post(too_long, true), std::invalid_argument);
    const abi::write_op bad_key{{0x1000, 8, std::int64_t{1} << 32}, {0x2000, 1}};
    CHECK_THROWS_AS(f.sq.post(bad_key, true), std::invalid_argument);
    CHECK(f.sq.posted() == 1);
    CHECK(f.sq.room() == 63);
    CHECK(std::memcmp(before.data(), f.ring.data(), before.size()) == 0);
}

TEST_CASE("send queue: memory that does not fit is refused at construction") {
    aligned_bytes ring(48 * 64), record(8), uar(4096);
    rig::qp::mlx5::bfreg reg(uar.data() + bf, half);
    CHECK_THROWS_AS(send_queue({ring.span(), record.span(), &reg}, qpn),
                    std::invalid_argument);   // 48 slots: not a power of two
    aligned_bytes ring64(64 * 64);
    CHECK_THROWS_AS(send_queue({ring64.span(), record.span().first(4), &reg}, qpn),
                    std::invalid_argument);   // record too short
    CHECK_THROWS_AS(send_queue({ring64.span(), record.span(), nullptr}, qpn),
                    std::invalid_argument);   // no register
    CHECK_THROWS_AS(send_queue({ring64.span(), record.span(), &reg}, 1u << 24),
                    std::invalid_argument);   // qpn over 24 bits
    using rig::qp::mlx5::bfreg;
    using rig::qp::mlx5::copy_rule;
    CHECK_THROWS_AS(bfreg(nullptr, half), std::invalid_argument);                 // no register
    CHECK_THROWS_AS(bfreg(uar.data() + bf + 4, half), std::invalid_argument);     // misaligned
    CHECK_THROWS_AS(bfreg(uar.data() + bf, 12), std::invalid_argument);           // half not 8k
    CHECK_THROWS_AS(bfreg(uar.data() + bf, 32, copy_rule::single_entries),
                    std::invalid_argument);   // a half that holds no 64-byte copy
}

TEST_CASE("send queue: post_batch writes what post does, counts once; refused batches post nothing") {
    fixture one(64), batch(64);
    // 3 rounds of 30 wrap the 64-slot ring; taken results free the slots between rounds
    for (int round = 0; round < 3; ++round) {
        const std::uint64_t first = one.sq.posted();
        for (std::uint64_t k = first; k < first + 30; ++k) {
            one.sq.post(write_of(k), k % 7 == 0);
        }
        CHECK(batch.sq.post_batch(30, [&](std::uint32_t i) { return write_of(first + i); },
                                  [&](std::uint32_t i) { return (first + i) % 7 == 0; }) == first);
        CHECK(batch.sq.posted() == first + 30);
        CHECK(same(batch.ring.span(), one.ring.span()));
        for (auto* f : {&one, &batch}) {
            abi::completion c{};
            c.opcode = abi::cqe_opcode::req;
            c.qpn = qpn;
            c.wqe_counter = static_cast<std::uint16_t>(first + 29);
            f->sq.complete(c);
            for (int i = 0; i < 30; ++i) {
                CHECK(f->sq.poll() == rig::qp::entry_result{64u});
            }
        }
    }
    // no room for the whole batch: refused before anything is written
    batch.sq.post_batch(40, [&](std::uint32_t i) { return write_of(90 + i); }, [](std::uint32_t) { return false; });
    std::vector<std::byte> before(batch.ring.data(), batch.ring.data() + batch.ring.n);
    CHECK_THROWS_WITH(batch.sq.post_batch(25, [&](std::uint32_t i) { return write_of(130 + i); },
                                          [](std::uint32_t) { return false; }),
                      Catch::Contains("a batch of 25 entries, room for 24"));
    CHECK(std::memcmp(before.data(), batch.ring.data(), before.size()) == 0);
    CHECK(batch.sq.posted() == 130);
    // an entry abi refuses in the middle: the batch is not posted, the counts stay
    const abi::write_op bad_key{{0x1000, 8, std::int64_t{1} << 32}, {0x2000, 1}};
    CHECK_THROWS_AS(batch.sq.post_batch(
                        3, [&](std::uint32_t i) { return i == 2 ? bad_key : write_of(130 + i); },
                        [](std::uint32_t) { return true; }),
                    std::invalid_argument);
    CHECK(batch.sq.posted() == 130);
    CHECK(batch.sq.room() == 24);
}
