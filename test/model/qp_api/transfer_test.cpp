// Bytes moved through the API by the model's data path (sim/mlx5/datapath): RDMA WRITE (also
// inline), SEND into a posted receive, RDMA READ, many entries on one doorbell (also as one batch
// call, and a batch refused whole), between two NICs, two queue pairs of one NIC and a queue pair
// connected to itself; a send longer than its receive fails both queue pairs, and what is posted
// after completes with the failure.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <time.h>

#include <catch2/catch.hpp>

#include "rig/nic.hpp"
#include "rig/qp.hpp"
#include "sim/roce/wire.hpp"
#include "test/model/qp_api/served_nics.hpp"
#include "test/sanitizer.hpp"

namespace {

using namespace std::chrono_literals;
using rig::test::ok;
using rig::test::served_function;
using rig::test::value;

constexpr auto bound = std::chrono::microseconds(5s);

void fill(const rig::region& r, std::size_t at, std::size_t n, std::uint8_t seed) {
    for (std::size_t i = 0; i < n; ++i) {
        r.data()[at + i] = std::byte(static_cast<std::uint8_t>(seed + i * 7));
    }
}
bool same(const rig::region& a, std::size_t at, const rig::region& b, std::size_t bt, std::size_t n) {
    return std::memcmp(a.data() + at, b.data() + bt, n) == 0;
}
// The oldest entry of `s` completed Ok with `n` bytes.
void done(rig::queue_pair& q, rig::side s, std::uint32_t n) { rig::test::expect_done(q, s, n, bound); }

// a (region ra) and b (region rb), connected: a's operations land in rb.
void round_trips(rig::queue_pair& a, const rig::region& ra, rig::queue_pair& b, const rig::region& rb) {
    const std::uint32_t capacity = a.room(rig::side::send);   // every earlier result taken: the ring's all
    // RDMA WRITE
    fill(ra, 0, 1000, 1);
    a.write(ra, 0, 1000, rb.remote(100));
    done(a, rig::side::send, 1000);
    CHECK(same(ra, 0, rb, 100, 1000));

    // RDMA WRITE inline, in the entry itself
    const std::byte small[] = {std::byte{'i'}, std::byte{'n'}, std::byte{'l'}, std::byte{'i'}, std::byte{'n'},
                               std::byte{'e'}};
    a.write_inline(small, rb.remote(5000));
    done(a, rig::side::send, 6);
    CHECK(std::memcmp(rb.data() + 5000, small, 6) == 0);

    // SEND into the peer's posted receive: the receive gives the message's length
    b.receive(rb, 8192, 4096);
    fill(ra, 2000, 3000, 2);
    a.send(ra, 2000, 3000);
    done(a, rig::side::send, 3000);
    done(b, rig::side::receive, 3000);
    CHECK(same(ra, 2000, rb, 8192, 3000));

    // RDMA READ of the peer's bytes
    fill(rb, 20000, 2000, 3);
    a.read(rb.remote(20000), ra, 30000, 2000);
    done(a, rig::side::send, 2000);
    CHECK(same(rb, 20000, ra, 30000, 2000));

    // many entries, one doorbell; completions in entry order
    for (std::uint32_t i = 0; i < 16; ++i) {
        fill(ra, 40000 + 64 * i, 64, static_cast<std::uint8_t>(i));
        a.post_write(ra, 40000 + 64 * i, 64 - i, rb.remote(40000 + 64 * i));
    }
    CHECK(a.room(rig::side::send) == capacity - 16);
    a.ring(rig::side::send);
    for (std::uint32_t i = 0; i < 16; ++i) {
        done(a, rig::side::send, 64 - i);
    }
    CHECK(a.room(rig::side::send) == capacity);
    for (std::uint32_t i = 0; i < 16; ++i) {
        CHECK(same(ra, 40000 + 64 * i, rb, 40000 + 64 * i, 64 - i));
    }
}

// Two NICs of two functions on one wire, a region of `bytes` on each, a queue pair on each,
// connected to each other.
using two_nics = rig::test::two_served_nics;

}  // namespace

TEST_CASE("transfer: WRITE, inline WRITE, SEND/RECEIVE, READ and a batch between two NICs", "[model][mlx5][api]") {
    two_nics t(64 * 1024);
    auto &r1 = t.r1, &r2 = t.r2;
    auto &a = t.a, &b = t.b;
    round_trips(a, r1, b, r2);
    round_trips(b, r2, a, r1);
    ok(a.destroy());
    ok(b.destroy());
}

TEST_CASE("transfer: two queue pairs of one NIC, and a queue pair connected to itself", "[model][mlx5][api]") {
    rig::sim::roce::wire w;
    served_function m(0, &w);
    auto nic = m.open();
    auto r1 = value(nic->allocate(64 * 1024, rig::access::remote));
    auto r2 = value(nic->allocate(64 * 1024, rig::access::remote));
    auto a = value(nic->make_qp());
    auto b = value(nic->make_qp());
    ok(a.connect(b.local()));
    ok(b.connect(a.local()));
    round_trips(a, r1, b, r2);

    auto self = value(nic->make_qp());
    ok(self.connect(self.local()));
    round_trips(self, r1, self, r2);
}

TEST_CASE("transfer: a send longer than its receive fails both queue pairs; later entries are flushed",
          "[model][mlx5][api]") {
    two_nics t(16 * 1024);
    auto &r1 = t.r1, &r2 = t.r2;
    auto &a = t.a, &b = t.b;

    a.write(r1, 0, 64, r2.remote(0));  // completes before the failure: keeps its result
    done(a, rig::side::send, 64);
    b.receive(r2, 0, 10);
    b.receive(r2, 100, 1000);  // never filled: flushed
    a.send(r1, 0, 100);        // longer than the receive it lands in
    auto s = a.wait(rig::side::send, bound);
    REQUIRE(s.has_value());
    REQUIRE_FALSE(s->has_value());
    CHECK(s->error().kind == rig::error_kind::entry);
    CHECK_FALSE(s->error().flushed);
    auto rcv = b.wait(rig::side::receive, bound);
    REQUIRE(rcv.has_value());
    REQUIRE_FALSE(rcv->has_value());
    CHECK_FALSE(rcv->error().flushed);  // the receive that was too small failed itself
    auto rest = b.wait(rig::side::receive, bound);
    REQUIRE(rest.has_value());
    REQUIRE_FALSE(rest->has_value());
    CHECK(rest->error().flushed);

    // A failed queue pair stays failed: what is posted later completes with the failure.
    a.write(r1, 0, 8, r2.remote(0));
    auto later = a.wait(rig::side::send, bound);
    REQUIRE(later.has_value());
    REQUIRE_FALSE(later->has_value());
    CHECK(later->error().flushed);
    CHECK(a.room(rig::side::send) == rig::test::ring_capacity());
}

TEST_CASE("transfer: after destroy returns Ok the NIC writes nothing for the queue pair; the peer's send "
          "fails once its retries end",
          "[model][mlx5][api]") {
    two_nics t(8192);
    auto &r1 = t.r1, &r2 = t.r2;
    auto &a = t.a, &b = t.b;
    b.receive(r2, 0, 4096);
    ok(b.destroy());
    fill(r1, 0, 100, 9);
    const auto t0 = std::chrono::steady_clock::now();
    a.send(r1, 0, 100);
    auto s = a.wait(rig::side::send, bound);
    const auto took = std::chrono::steady_clock::now() - t0;
    REQUIRE(s.has_value());
    REQUIRE_FALSE(s->has_value());
    CHECK_FALSE(s->error().flushed);
    CHECK(took >= 7 * 60ms);  // 7 retries, each after the 67 ms ack timeout
    CHECK(took < 4s);
    for (std::size_t i = 0; i < 4096; ++i) {
        REQUIRE(r2.data()[i] == std::byte{0});  // the destroyed QP's receive took nothing
    }
}

TEST_CASE("transfer: a long wait sleeps on the CQ's completion event, not on a core", "[model][mlx5][api]") {
    rig::sim::roce::wire w;
    served_function m1(0, &w);
    served_function m2(1, &w);
    std::atomic<int> events{0};
    rig::nic_options counting;
    counting.completion = [&](std::uint32_t) { events.fetch_add(1); };
    counting.wait_look_interval = std::chrono::milliseconds(60s);  // only an event wakes a waiter early
    auto n1 = m1.open(counting);
    auto n2 = m2.open();
    auto r1 = value(n1->allocate(4096, rig::access::remote));
    auto r2 = value(n2->allocate(4096, rig::access::remote));
    auto a = value(n1->make_qp());
    auto b = value(n2->make_qp());
    ok(a.connect(b.local()));
    ok(b.connect(a.local()));

    // nothing arrives: the bound passes, the entry stays due, and the process slept
    a.receive(r1, 0, 4096);
    const auto cpu = [] {
        timespec t{};
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
        return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
    };
    const auto cpu0 = cpu();
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_FALSE(a.wait(rig::side::receive, std::chrono::microseconds(300ms)).has_value());
    const auto wall = std::chrono::steady_clock::now() - t0;
    CHECK(wall >= 300ms);
    // the model's threads share the process: their idle passes back off to 1 ms, so the whole
    // process stays far below one core while the waiter sleeps
    const double cpu_ms = std::chrono::duration<double, std::milli>(cpu() - cpu0).count();
    const double wall_ms = std::chrono::duration<double, std::milli>(wall).count();
    INFO("process CPU " << cpu_ms << " ms over " << wall_ms << " ms");
    // under ThreadSanitizer the idle passes cost more (169 ms of 300 measured): test/sanitizer.hpp
    CHECK(std::chrono::duration<double>(cpu() - cpu0).count() <
          rig::test::sanitizer_cpu_factor * std::chrono::duration<double>(wall).count() / 3);
    CHECK(events.load() == 0);

    // a send from another thread lands while the waiter sleeps: the armed CQ's event wakes it
    std::thread sender([&] {
        std::this_thread::sleep_for(100ms);
        fill(r2, 0, 64, 5);
        b.send(r2, 0, 64);
    });
    auto got = a.wait(rig::side::receive, bound);
    sender.join();
    REQUIRE(got.has_value());
    REQUIRE(got->has_value());
    CHECK(**got == 64);
    CHECK(same(r1, 0, r2, 0, 64));
    CHECK(events.load() >= 1);   // it woke on a COMP event of the receive CQ
    done(b, rig::side::send, 64);
}

TEST_CASE("transfer: a batch of WRITEs under one doorbell lands and completes in order; a batch with one bad "
          "entry posts nothing",
          "[model][mlx5][api]") {
    constexpr std::size_t bytes = 64 * 1024;
    two_nics t(bytes);
    auto &r1 = t.r1, &r2 = t.r2;
    auto& a = t.a;
    const std::uint32_t capacity = a.room(rig::side::send);

    // 16 WRITEs of 64 - i bytes, one call, one doorbell: each lands, each completes in order
    std::vector<rig::write_entry> batch;
    for (std::uint32_t i = 0; i < 16; ++i) {
        fill(r1, 64 * i, 64, static_cast<std::uint8_t>(i + 1));
        batch.push_back({.at = 64 * i, .n = 64 - i, .to = r2.remote(1000 + 64 * i), .tag = i});
    }
    a.write(r1, batch);
    for (std::uint32_t i = 0; i < 16; ++i) {
        done(a, rig::side::send, 64 - i);
    }
    CHECK(a.room(rig::side::send) == capacity);
    for (std::uint32_t i = 0; i < 16; ++i) {
        CHECK(same(r1, 64 * i, r2, 1000 + 64 * i, 64 - i));
    }

    // one bad entry among good ones: std::invalid_argument, nothing posted, the ring's room as it was
    std::vector<rig::write_entry> bad;
    for (std::uint32_t i = 0; i < 16; ++i) {
        bad.push_back({.at = 64 * i, .n = 64, .to = r2.remote(20000 + 64 * i)});
    }
    bad[7].at = bytes - 10;   // 64 bytes from 10 before the region's end
    CHECK_THROWS_AS(a.write(r1, bad), std::invalid_argument);
    CHECK_THROWS_AS(a.post_write(r1, bad), std::invalid_argument);
    CHECK(a.room(rig::side::send) == capacity);
    bad[7].at = 64 * 7;
    bad[7].n = (std::size_t{1} << 31) + 1;   // over one message
    CHECK_THROWS_AS(a.write(r1, bad), std::invalid_argument);
    bad[7].n = 64;
    bad[7].to.address = std::uint64_t{1} << 63;   // out of any remote range
    CHECK_THROWS_AS(a.write(r1, bad), std::invalid_argument);
    bad[7].to = r2.remote(20000 + 64 * 7);
    CHECK_THROWS_AS(a.write(r2, bad), std::invalid_argument);   // a region of the other NIC
    // a batch the ring has no room for, each entry good
    const std::vector<rig::write_entry> too_many(capacity + 1, {.at = 0, .n = 8, .to = r2.remote(30000)});
    CHECK_THROWS_AS(a.write(r1, too_many), std::invalid_argument);
    CHECK(a.room(rig::side::send) == capacity);
    a.write(r1, std::span<const rig::write_entry>{});   // empty: no entry, no doorbell
    CHECK(a.room(rig::side::send) == capacity);

    // RC keeps order: once a WRITE posted after the refusals completed, any refused entry would
    // have landed before it. None did.
    fill(r1, 50000, 8, 9);
    a.write(r1, 50000, 8, r2.remote(60000));
    done(a, rig::side::send, 8);
    CHECK(same(r1, 50000, r2, 60000, 8));
    for (std::size_t i = 20000; i < 30008; ++i) {
        REQUIRE(r2.data()[i] == std::byte{0});
    }

    // the batch without its doorbell, rung with an entry posted alone; unsignalled entries
    // complete with the next signalled one and hand out no result of their own
    batch.resize(4);
    for (std::size_t i = 0; i < 4; ++i) {
        batch[i].to = r2.remote(40000 + 64 * i);
        batch[i].sig = i % 2 == 0 ? rig::signaled::no : rig::signaled::yes;
    }
    a.post_write(r1, batch);
    CHECK(a.room(rig::side::send) == capacity - 4);
    a.post_write(r1, 0, 64, r2.remote(45000));
    a.ring(rig::side::send);
    done(a, rig::side::send, 63);   // entries 1 and 3 (0 and 2 unsignalled)
    done(a, rig::side::send, 61);
    done(a, rig::side::send, 64);
    CHECK(a.room(rig::side::send) == capacity);
    for (std::uint32_t i = 0; i < 4; ++i) {
        CHECK(same(r1, 64 * i, r2, 40000 + 64 * i, 64 - i));
    }
    CHECK(same(r1, 0, r2, 45000, 64));

    ok(a.destroy());
    CHECK_THROWS_AS(a.write(r1, batch), std::invalid_argument);
}
