// BlueFlame over plain memory (qp/mlx5/bfreg.hpp): a doorbell of one new entry copies the whole
// 64-byte entry into the bfreg's half, one of several entries writes the 8-byte doorbell only,
// the copy rule (never / inline entries / single entries), and queues sharing a bfreg alternate
// its halves between them and lock (rdma-core providers/mlx5/qp.c post_send_db, mlx5_bf_copy;
// mlx5.h struct mlx5_bf).
#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "abi/bits.hpp"
#include "qp/mlx5/send_queue.hpp"
#include "test/unit/qp_mlx5/memory.hpp"

namespace abi = rig::mlx5::abi;
using rig::qp::mlx5::bfreg;
using rig::qp::mlx5::copy_rule;
using rig::qp::mlx5::send_queue;
using rig::test::aligned_bytes;

namespace {

constexpr std::size_t bf = abi::bfreg_offset(1, 9);   // bfreg 1 of the UAR page
constexpr std::size_t half = abi::bfreg_half(9);      // 256

// A send ring of 64 slots and its record, ringing through `reg`.
struct queue {
    queue(bfreg& reg, std::uint32_t qpn)
        : ring(64 * abi::entry_size, std::byte{0xee}), record(8), sq({ring.span(), record.span(), &reg}, qpn) {}
    aligned_bytes ring, record;
    send_queue sq;
    std::span<const std::byte> entry(std::uint64_t k) const { return ring.span().subspan((k % 64) * 64, 64); }
};

abi::write_op write_of(std::uint64_t k) {
    const auto i = static_cast<std::int64_t>(k);
    return {{0x10000 + i * 64, 64, 0x77}, {0x900000 + i * 64, 0xabc}};
}

bool same(std::span<const std::byte> a, std::span<const std::byte> b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}
bool zero(std::span<const std::byte> a) {
    for (std::byte b : a) {
        if (b != std::byte{0}) {
            return false;
        }
    }
    return true;
}

}  // namespace

TEST_CASE("BlueFlame: one new entry is copied whole into the half, then the other half") {
    aligned_bytes uar(abi::uar_page_size);
    bfreg reg(uar.data() + bf, half, copy_rule::single_entries);
    queue q(reg, 0x321);
    const std::span<const std::byte> page = uar.span();
    q.sq.post(write_of(0), true);
    q.sq.ring();
    CHECK(same(page.subspan(bf, 64), q.entry(0)));          // all 64 bytes, ctrl first
    CHECK(zero(page.subspan(bf + 64, 2 * half - 64)));      // nothing beyond one block, nor in half 1
    CHECK(reg.offset() == half);
    q.sq.post(write_of(1), false);
    q.sq.ring();
    CHECK(same(page.subspan(bf + half, 64), q.entry(1)));
    CHECK(same(page.subspan(bf, 64), q.entry(0)));          // half 0 as the first doorbell left it
    CHECK(reg.offset() == 0);
    // the record word as for an 8-byte doorbell: be32(2)
    CHECK(rig::abi::load_be<std::uint32_t>(q.record.data() + abi::qp_dbr::send_counter) == 2);
}

TEST_CASE("BlueFlame: a doorbell of several entries writes the last one's 8 bytes only") {
    aligned_bytes uar(abi::uar_page_size);
    bfreg reg(uar.data() + bf, half, copy_rule::single_entries);
    queue q(reg, 0x321);
    const std::span<const std::byte> page = uar.span();
    for (std::uint64_t k = 0; k < 3; ++k) {
        q.sq.post(write_of(k), k == 2);
    }
    q.sq.ring();
    CHECK(same(page.subspan(bf, 8), q.entry(2).first(8)));
    CHECK(zero(page.subspan(bf + 8, 2 * half - 8)));
    CHECK(reg.offset() == half);
    // post_batch of 1 is a single entry: copied
    q.sq.post_batch(1, [](std::uint32_t) { return write_of(3); }, [](std::uint32_t) { return true; });
    q.sq.ring();
    CHECK(same(page.subspan(bf + half, 64), q.entry(3)));
}

TEST_CASE("BlueFlame: the rule decides which single entries are copied") {
    aligned_bytes uar(abi::uar_page_size);
    const std::span<const std::byte> page = uar.span();
    const abi::write_inline_op wi{"inline bytes", {0x5000, 0x42}};
    SECTION("never: 8 bytes, inline or not") {
        bfreg reg(uar.data() + bf, half, copy_rule::never);
        queue q(reg, 7);
        q.sq.post(wi, true);
        q.sq.ring();
        CHECK(same(page.subspan(bf, 8), q.entry(0).first(8)));
        CHECK(zero(page.subspan(bf + 8, 56)));
    }
    SECTION("inline entries: a WRITE is rung with 8 bytes, an inline WRITE copied") {
        bfreg reg(uar.data() + bf, half, copy_rule::inline_entries);
        queue q(reg, 7);
        q.sq.post(write_of(0), true);
        q.sq.ring();
        CHECK(same(page.subspan(bf, 8), q.entry(0).first(8)));
        CHECK(zero(page.subspan(bf + 8, 56)));
        q.sq.post(wi, true);
        q.sq.ring();
        CHECK(same(page.subspan(bf + half, 64), q.entry(1)));
    }
}

TEST_CASE("BlueFlame: two queues on one bfreg alternate its halves and lock once it is shared") {
    aligned_bytes uar(abi::uar_page_size);
    bfreg reg(uar.data() + bf, half, copy_rule::single_entries);
    reg.add_user();
    CHECK_FALSE(reg.shared());
    reg.add_user();
    CHECK(reg.shared());
    CHECK(reg.users() == 2);
    queue a(reg, 0x10), b(reg, 0x20);
    const std::span<const std::byte> page = uar.span();
    a.sq.post(write_of(0), true);
    a.sq.ring();
    b.sq.post(write_of(5), true);
    b.sq.ring();   // the bfreg's other half: a's copy is not overwritten
    CHECK(same(page.subspan(bf, 64), a.entry(0)));
    CHECK(same(page.subspan(bf + half, 64), b.entry(0)));
    CHECK(rig::abi::load_be<std::uint32_t>(page.data() + bf + 4) == ((0x10u << 8) | 3));
    CHECK(rig::abi::load_be<std::uint32_t>(page.data() + bf + half + 4) == ((0x20u << 8) | 3));
    a.sq.post(write_of(1), true);
    a.sq.ring();   // back to half 0
    CHECK(same(page.subspan(bf, 64), a.entry(1)));
    CHECK(reg.offset() == half);
}

// A ring on a shared bfreg waits for its lock: held here, another thread's ring writes nothing
// until it is given back. An unshared bfreg's ring takes no lock.
TEST_CASE("BlueFlame: a ring on a shared bfreg waits for the bfreg's lock") {
    aligned_bytes uar(abi::uar_page_size);
    bfreg reg(uar.data() + bf, half, copy_rule::single_entries);
    reg.add_user();
    queue a(reg, 0x10);
    const std::span<const std::byte> page = uar.span();
    SECTION("alone: no lock taken") {
        reg.lock();
        a.sq.post(write_of(0), true);
        a.sq.ring();   // would never return if it took the lock
        CHECK(same(page.subspan(bf, 64), a.entry(0)));
        reg.unlock();
    }
    SECTION("shared: the ring waits") {
        reg.add_user();
        queue b(reg, 0x20);
        a.sq.post(write_of(0), true);
        reg.lock();
        std::atomic<bool> rung{false};
        std::thread t([&] {
            a.sq.ring();
            rung = true;
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        CHECK_FALSE(rung.load());
        CHECK(zero(page.subspan(bf, 2 * half)));   // nothing written while the lock is held
        CHECK(reg.offset() == 0);
        reg.unlock();
        t.join();
        CHECK(rung.load());
        CHECK(same(page.subspan(bf, 64), a.entry(0)));
        CHECK(reg.offset() == half);
    }
}

// Two threads, one queue each, on the shared bfreg: every ring toggles the offset under the lock,
// so after an even number of rings it is back at 0 (a stress check: without the lock a lost
// toggle needs two rings to overlap, which a short run may not meet; the test above is the
// deterministic one).
TEST_CASE("BlueFlame: rings of two threads on a shared bfreg keep the toggle count") {
    aligned_bytes uar(abi::uar_page_size);
    bfreg reg(uar.data() + bf, half, copy_rule::single_entries);
    reg.add_user();
    reg.add_user();
    queue a(reg, 0x10), b(reg, 0x20);
    constexpr int rings = 100001;   // per thread, odd: 2 * odd toggles leave the offset at 0
    const auto run = [](queue& q) {
        for (int i = 0; i < rings; ++i) {
            q.sq.post(write_of(static_cast<std::uint64_t>(i)), true);
            q.sq.ring();
            // the NIC's completion of that entry, so the ring never fills
            abi::completion c{};
            c.opcode = abi::cqe_opcode::req;
            c.wqe_counter = static_cast<std::uint16_t>(i & 0xffff);
            q.sq.complete(c);
            static_cast<void>(q.sq.poll());
        }
    };
    std::thread t([&] { run(b); });
    run(a);
    t.join();
    CHECK(reg.offset() == 0);
    CHECK_FALSE(a.sq.failed());
    CHECK_FALSE(b.sq.failed());
    // each half holds one whole entry of one queue: its ctrl names a's or b's QP
    for (std::size_t h : {std::size_t{0}, half}) {
        const std::uint32_t qpn_ds = rig::abi::load_be<std::uint32_t>(uar.data() + bf + h + 4);
        CHECK(((qpn_ds >> 8) == 0x10 || (qpn_ds >> 8) == 0x20));
    }
}
