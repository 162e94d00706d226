// Completion groups (issue 18, rig/group.hpp) on two model functions on one wire: many queue pairs
// completing to one CQ, each ring's completions in entry order with their tags, operations and
// byte counts; failures with flushes as the per-queue-pair poll gives them; drain-arm-drain
// against a peer that sends at random moments (no completion lost between a poll and the sleep);
// an idle wait that sleeps; and every misuse refused with nothing changed.
#include <sys/resource.h>
#include <poll.h>
#include <time.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "abi/mlx5/ifc/cmd.hpp"
#include "rig/group.hpp"
#include "rig/nic.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"
#include "sim/roce/wire.hpp"
#include "test/model/qp_api/served_nics.hpp"

namespace {

using namespace std::chrono_literals;
using rig::completion;
using rig::operation;
using rig::side;
using rig::test::ok;
using rig::test::served_function;
using rig::test::value;

// Two NICs of the family under test (RIG_TEST_FAMILY: the suite runs once per family) on one wire.
using two_groups = rig::test::two_served_functions;

std::uint64_t tag_of(std::size_t qp, std::size_t k) { return (std::uint64_t{qp} << 32) | k; }

// Polls `g` with a span of `batch` until `want` completions came (at most 10 s).
std::vector<completion> collect(rig::completion_group& g, std::size_t want, std::size_t batch) {
    std::vector<completion> got;
    std::vector<completion> buf(batch);
    const auto end = std::chrono::steady_clock::now() + 10s;
    while (got.size() < want && std::chrono::steady_clock::now() < end) {
        const std::size_t n = g.wait(buf, 100ms);
        REQUIRE(n <= batch);
        got.insert(got.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
    }
    return got;
}

double thread_cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

}  // namespace

TEST_CASE("group: 64 queue pairs per NIC complete to one CQ each, in entry order per ring, with their tags",
          "[model][group]") {
    constexpr std::size_t qps = 64;
    constexpr std::size_t per_qp = 12;   // even: WRITE, odd: SEND into a posted receive
    constexpr std::size_t room = 512;
    two_groups t(qps * per_qp * room);
    rig::completion_group g1 = value(t.n1->make_group({.entries = 1u << 15, .log_ring_entries = 5}));
    rig::completion_group g2 = value(t.n2->make_group({.entries = 1u << 15, .log_ring_entries = 5}));
    CHECK(g1.native_handle() >= 0);
    CHECK(g1.entries() == 1u << 15);
    std::vector<rig::queue_pair> a, b;
    for (std::size_t i = 0; i < qps; ++i) {
        a.push_back(value(t.n1->make_qp(g1)));
        b.push_back(value(t.n2->make_qp(g2)));
    }
    CHECK(g1.queue_pairs() == qps);
    std::map<std::uint32_t, std::size_t> index_of_a, index_of_b;
    for (std::size_t i = 0; i < qps; ++i) {
        ok(a[i].connect(b[i].local()));
        ok(b[i].connect(a[i].local()));
        index_of_a[a[i].number()] = i;
        index_of_b[b[i].number()] = i;
    }
    // Receives first (tagged), then every queue pair's WRITEs and SENDs, rung once per queue pair.
    std::size_t sends = 0;
    for (std::size_t i = 0; i < qps; ++i) {
        for (std::size_t k = 1; k < per_qp; k += 2) {
            b[i].post_receive(t.r2, (i * per_qp + k) * room, room, tag_of(i, k));
        }
        b[i].ring(side::receive);
    }
    for (std::size_t i = 0; i < qps; ++i) {
        for (std::size_t k = 0; k < per_qp; ++k) {
            const std::size_t at = (i * per_qp + k) * room;
            const std::size_t n = 1 + (i * 31 + k * 17) % (room - 1);
            for (std::size_t j = 0; j < n; ++j) {
                t.r1.data()[at + j] = std::byte(static_cast<std::uint8_t>(i + k + j));
            }
            if (k % 2 == 0) {
                a[i].post_write(t.r1, at, n, t.r2.remote(at), tag_of(i, k));
            } else {
                a[i].post_send(t.r1, at, n, tag_of(i, k));
                ++sends;
            }
        }
        a[i].ring(side::send);
    }
    // A span of 7: results that do not fit wait for the next poll, in order.
    const std::vector<completion> sent = collect(g1, qps * per_qp, 7);
    const std::vector<completion> received = collect(g2, sends, 5);
    REQUIRE(sent.size() == qps * per_qp);
    REQUIRE(received.size() == sends);
    std::vector<std::size_t> next_sent(qps, 0), next_received(qps, 1);
    for (const completion& c : sent) {
        INFO("qp " << c.qp << " tag " << c.tag);
        REQUIRE(c.ok());
        REQUIRE(index_of_a.contains(c.qp));
        const std::size_t i = index_of_a[c.qp];
        CHECK(c.ring == side::send);
        CHECK(c.tag == tag_of(i, next_sent[i]));   // this ring's entries in order
        CHECK(c.op == (next_sent[i] % 2 == 0 ? operation::write : operation::send));
        CHECK(c.bytes == 1 + (i * 31 + next_sent[i] * 17) % (room - 1));
        ++next_sent[i];
    }
    for (const completion& c : received) {
        INFO("qp " << c.qp << " tag " << c.tag);
        REQUIRE(c.ok());
        const std::size_t i = index_of_b.at(c.qp);
        const std::size_t k = next_received[i];
        CHECK(c.ring == side::receive);
        CHECK(c.op == operation::receive);
        CHECK(c.tag == tag_of(i, k));
        CHECK(c.bytes == 1 + (i * 31 + k * 17) % (room - 1));
        next_received[i] += 2;
    }
    for (std::size_t i = 0; i < qps; ++i) {
        CHECK(next_sent[i] == per_qp);
        for (std::size_t k = 0; k < per_qp; ++k) {
            const std::size_t at = (i * per_qp + k) * room;
            const std::size_t n = 1 + (i * 31 + k * 17) % (room - 1);
            CHECK(std::memcmp(t.r1.data() + at, t.r2.data() + at, n) == 0);
        }
    }
    // Nothing more: an empty poll, and the per-queue-pair poll is refused for a group's member.
    std::array<completion, 4> more{};
    CHECK(g1.poll(more) == 0);
    CHECK_THROWS_WITH(a[0].poll(side::send), Catch::Contains("completion group"));
    CHECK_THROWS_WITH(a[0].wait(side::send, 1ms), Catch::Contains("completion group"));
    // Destroy: members first.
    CHECK_THROWS_WITH(g1.destroy(), Catch::Contains("64 live queue pair"));
    for (auto& q : a) {
        ok(q.destroy());
    }
    CHECK(g1.queue_pairs() == 0);
    ok(g1.destroy());
    CHECK(g1.destroyed());
    CHECK_THROWS_AS(g1.poll(more), std::invalid_argument);
}

TEST_CASE("group: a failed entry carries its error, the rest of its queue pair completes flushed, other "
          "queue pairs go on", "[model][group]") {
    two_groups t(64 * 1024);
    rig::completion_group g = value(t.n1->make_group({.entries = 1024, .log_ring_entries = 4}));
    rig::queue_pair bad = value(t.n1->make_qp(g));
    rig::queue_pair good = value(t.n1->make_qp(g));
    rig::queue_pair pb = value(t.n2->make_qp());
    rig::queue_pair pg = value(t.n2->make_qp());
    ok(bad.connect(pb.local()));
    ok(pb.connect(bad.local()));
    ok(good.connect(pg.local()));
    ok(pg.connect(good.local()));
    bad.post_receive(t.r1, 0, 64, 100);
    bad.ring(side::receive);
    bad.post_write(t.r1, 0, 64, t.r2.remote(0), 1);
    bad.post_write(t.r1, 0, 64, rig::remote{t.r2.remote(0).address, t.r2.remote(0).key ^ 0x5a5a00}, 2);  // no such key
    bad.post_write(t.r1, 0, 64, t.r2.remote(64), 3);
    bad.ring(side::send);
    good.write(t.r1, 128, 32, t.r2.remote(128), 7);
    const std::vector<completion> got = collect(g, 5, 16);
    REQUIRE(got.size() == 5);
    std::map<std::uint64_t, const completion*> by_tag;
    for (const completion& c : got) {
        by_tag[c.tag] = &c;
    }
    REQUIRE(by_tag.size() == 5);
    CHECK(by_tag[1]->ok());
    CHECK(by_tag[1]->bytes == 64);
    REQUIRE_FALSE(by_tag[2]->ok());
    CHECK(by_tag[2]->failure->kind == rig::error_kind::entry);
    CHECK_FALSE(by_tag[2]->failure->flushed);
    if (rig::test::family_under_test() == rig::test::family::mlx5) {
        CHECK(by_tag[2]->failure->message == "send ring entry failed: remote access error (syndrome 0x13, vendor 0x0)");
        CHECK(by_tag[2]->failure->syndrome == 0x13u);   // MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR
    } else {
        CHECK(by_tag[2]->failure->message == "send ring entry failed: REMOTE_ACCESS_ERR (syndrome 0x7, vendor 0x0)");
        CHECK(by_tag[2]->failure->syndrome == 0x7u);    // CQ_REQ_STATUS_REMOTE_ACCESS_ERR
    }
    REQUIRE_FALSE(by_tag[3]->ok());
    CHECK(by_tag[3]->failure->flushed);
    REQUIRE_FALSE(by_tag[100]->ok());
    CHECK(by_tag[100]->ring == side::receive);
    CHECK(by_tag[100]->failure->flushed);
    CHECK(by_tag[7]->ok());
    CHECK(by_tag[7]->qp == good.number());
    CHECK(by_tag[7]->bytes == 32);
}

TEST_CASE("group: drain-arm-drain loses no completion against a peer sending at random moments",
          "[model][group]") {
    constexpr std::size_t messages = 3000;
    two_groups t(1 << 20);
    rig::completion_group g = value(t.n2->make_group({.entries = 1024, .log_ring_entries = 6}));
    rig::queue_pair receiver = value(t.n2->make_qp(g));
    rig::queue_pair sender = value(t.n1->make_qp());
    ok(receiver.connect(sender.local()));
    ok(sender.connect(receiver.local()));
    for (std::size_t k = 0; k < 32; ++k) {
        receiver.post_receive(t.r2, 64 * k, 64, k);
    }
    receiver.ring(side::receive);
    std::atomic<bool> sender_failed{false};
    std::thread peer([&] {
        std::mt19937 random(7);
        for (std::size_t k = 0; k < messages && !sender_failed; ++k) {
            std::memcpy(t.r1.data() + 64 * (k % 32), &k, sizeof k);
            sender.send(t.r1, 64 * (k % 32), sizeof k);
            auto r = sender.wait(side::send, 5s);
            if (!r || !*r) {
                sender_failed = true;
            }
            if (random() % 4 == 0) {
                std::this_thread::sleep_for(std::chrono::microseconds(random() % 200));
            }
        }
    });
    std::size_t received = 0, sleeps = 0, lost = 0;
    std::array<completion, 8> done{};
    while (received < messages && lost == 0 && !sender_failed) {
        std::size_t n = g.poll(done);
        if (n == 0) {
            g.arm();
            n = g.poll(done);
        }
        if (n == 0) {
            ++sleeps;
            pollfd p{g.native_handle(), POLLIN, 0};
            if (::poll(&p, 1, 5000) == 0) {
                ++lost;  // 5 s without the event the next completion had to raise
            }
            continue;
        }
        for (std::size_t i = 0; i < n; ++i) {
            REQUIRE(done[i].ok());
            std::uint64_t value_seen = 0;
            std::memcpy(&value_seen, t.r2.data() + 64 * (received % 32), sizeof value_seen);
            CHECK(value_seen == received);
            CHECK(done[i].tag == received % 32);
            receiver.post_receive(t.r2, 64 * (received % 32), 64, received % 32);
            ++received;
        }
        receiver.ring(side::receive);
    }
    peer.join();
    CHECK_FALSE(sender_failed);
    CHECK(lost == 0);
    CHECK(received == messages);
    INFO("slept " << sleeps << " times");
    CHECK(sleeps > 0);   // the race was run: the receiver did sleep between messages
}

TEST_CASE("group: an idle wait sleeps on the eventfd", "[model][group]") {
    two_groups t(4096);
    rig::completion_group g = value(t.n1->make_group({.entries = 256, .log_ring_entries = 4}));
    rig::queue_pair q = value(t.n1->make_qp(g));
    CHECK(g.queue_pairs() == 1);
    CHECK_FALSE(q.destroyed());
    std::array<completion, 4> done{};
    const double cpu = thread_cpu_seconds();
    const auto wall = std::chrono::steady_clock::now();
    CHECK(g.wait(done, 1s) == 0);
    const double spent = thread_cpu_seconds() - cpu;
    CHECK(std::chrono::steady_clock::now() - wall >= 1s);
    INFO("CPU over an idle second: " << spent * 1e3 << " ms");
    CHECK(spent < 0.05);   // asleep, not spinning: ~100 looks of a few microseconds
}

TEST_CASE("group: misuse and refusals change nothing", "[model][group]") {
    two_groups t(4096);
    CHECK_THROWS_WITH(t.n1->make_group({.entries = 0}), Catch::Contains("0 entries"));
    rig::completion_group g = value(t.n1->make_group({.entries = 64, .log_ring_entries = 4}));
    CHECK(g.entries() == 64);
    // 2 x 16 ring entries per queue pair: two fit in 64, a third does not.
    rig::queue_pair q1 = value(t.n1->make_qp(g));
    rig::queue_pair q2 = value(t.n1->make_qp(g));
    const std::size_t qps = t.n1->queue_pairs();
    CHECK_THROWS_WITH(t.n1->make_qp(g), Catch::Contains("room for 0 more"));
    CHECK(t.n1->queue_pairs() == qps);
    CHECK(g.queue_pairs() == 2);
    ok(q2.destroy());
    rig::queue_pair q3 = value(t.n1->make_qp(g));   // its room came back
    CHECK(q3.number() != q1.number());
    // A group of another NIC.
    CHECK_THROWS_WITH(t.n2->make_qp(g), Catch::Contains("not one of this NIC"));
    // Vectors: completion_vectors (8 by default) groups at once, the next refused by name.
    std::vector<rig::completion_group> more;
    for (;;) {
        auto r = t.n1->make_group({.entries = 64});
        if (!r) {
            CHECK(r.error().message.find("completion_vectors") != std::string::npos);
            break;
        }
        more.push_back(std::move(*r));
        REQUIRE(more.size() < 64);
    }
    CHECK(more.size() == 7);   // and g: 8
    ok(more.back().destroy());
    more.back() = value(t.n1->make_group({.entries = 64}));   // its vector came back
}

TEST_CASE("group: 1024 queue pairs on one CQ, every one's WRITEs completed with its tags", "[model][group]") {
    constexpr std::size_t qps = 1024;
    constexpr std::size_t per_qp = 3;
    rig::nic_options small_rings;   // the peers' rings as small as the group's: the model's memory per QP
    small_rings.log_ring_entries = 2;
    two_groups t(qps * per_qp * 64, rig::access::remote, small_rings);
    rig::completion_group g = value(t.n1->make_group({.entries = 1u << 14, .log_ring_entries = 2}));
    // Each NIC's control calls on a thread of their own (a firmware command's round trip, not
    // CPU, is what 2048 queue pairs cost, as in scale_test.cpp); the first refusal kept as text.
    std::vector<rig::queue_pair> a(qps), b(qps);
    std::string a_failed, b_failed;
    const auto on_each = [&](auto&& step, std::string& failed) {
        for (std::size_t i = 0; i < qps && failed.empty(); ++i) {
            failed = step(i);
        }
    };
    const auto make_a = [&](std::size_t i) -> std::string {
        auto q = t.n1->make_qp(g);
        return q ? (a[i] = std::move(*q), "") : "make_qp(group) " + std::to_string(i) + ": " + q.error().message;
    };
    const auto make_b = [&](std::size_t i) -> std::string {
        auto q = t.n2->make_qp();
        return q ? (b[i] = std::move(*q), "") : "make_qp " + std::to_string(i) + ": " + q.error().message;
    };
    const auto connect_a = [&](std::size_t i) -> std::string {
        auto r = a[i].connect(b[i].local());
        return r ? "" : "connect " + std::to_string(i) + ": " + r.error().message;
    };
    const auto connect_b = [&](std::size_t i) -> std::string {
        auto r = b[i].connect(a[i].local());
        return r ? "" : "connect " + std::to_string(i) + ": " + r.error().message;
    };
    {
        std::thread other([&] { on_each(make_b, b_failed); });
        on_each(make_a, a_failed);
        other.join();
    }
    REQUIRE(a_failed.empty());
    REQUIRE(b_failed.empty());
    {
        std::thread other([&] { on_each(connect_b, b_failed); });
        on_each(connect_a, a_failed);
        other.join();
    }
    REQUIRE(a_failed.empty());
    REQUIRE(b_failed.empty());
    std::map<std::uint32_t, std::size_t> index_of;
    for (std::size_t i = 0; i < qps; ++i) {
        index_of[a[i].number()] = i;
    }
    CHECK(g.queue_pairs() == qps);
    for (std::size_t i = 0; i < qps; ++i) {
        for (std::size_t k = 0; k < per_qp; ++k) {
            const std::size_t at = (i * per_qp + k) * 64;
            std::memcpy(t.r1.data() + at, &at, sizeof at);
            a[i].post_write(t.r1, at, 64, t.r2.remote(at), tag_of(i, k));
        }
        a[i].ring(side::send);
    }
    const std::vector<completion> done = collect(g, qps * per_qp, 64);
    REQUIRE(done.size() == qps * per_qp);
    std::vector<std::size_t> next(qps, 0);
    for (const completion& c : done) {
        REQUIRE(c.ok());
        const std::size_t i = index_of.at(c.qp);
        CHECK(c.tag == tag_of(i, next[i]++));
        CHECK(c.bytes == 64);
    }
    CHECK(std::memcmp(t.r1.data(), t.r2.data(), qps * per_qp * 64) == 0);
}

TEST_CASE("unsignalled entries complete silently with the next signalled one; a failing one reports its error",
          "[model][group]") {
    two_groups t(64 * 1024);
    rig::queue_pair a = value(t.n1->make_qp());
    rig::queue_pair b = value(t.n2->make_qp());
    ok(a.connect(b.local()));
    ok(b.connect(a.local()));
    const std::uint32_t capacity = a.room(side::send);
    // The per-queue-pair poll: five unsignalled WRITEs, then a signalled one: one result, all landed.
    for (std::size_t k = 0; k < 6; ++k) {
        std::memset(t.r1.data() + 100 * k, static_cast<int>(0x30 + k), 100);
        a.post_write(t.r1, 100 * k, k == 5 ? 77 : 100, t.r2.remote(100 * k), k, k == 5 ? rig::signaled::yes : rig::signaled::no);
    }
    a.ring(side::send);
    const auto r = a.wait(side::send, std::chrono::microseconds(5s));
    REQUIRE(r.has_value());
    REQUIRE(r->has_value());
    CHECK(**r == 77u);   // the signalled one's result: the five before it are not handed out
    CHECK_FALSE(a.poll(side::send).has_value());
    CHECK(a.room(side::send) == capacity);   // their slots came back with it
    CHECK(std::memcmp(t.r1.data(), t.r2.data(), 577) == 0);

    // A group: only the signalled entries' completions, and an unsignalled failure's.
    rig::completion_group g = value(t.n1->make_group({.entries = 256, .log_ring_entries = 4}));
    rig::queue_pair q = value(t.n1->make_qp(g));
    rig::queue_pair p = value(t.n2->make_qp());
    ok(q.connect(p.local()));
    ok(p.connect(q.local()));
    for (std::uint64_t k = 1; k <= 4; ++k) {
        q.post_write(t.r1, 0, 64, t.r2.remote(4096), k, k == 4 ? rig::signaled::yes : rig::signaled::no);
    }
    q.ring(side::send);
    std::vector<completion> got = collect(g, 1, 8);
    REQUIRE(got.size() == 1);
    CHECK(got[0].tag == 4u);
    CHECK(got[0].ok());
    const rig::remote bad{t.r2.remote(0).address, t.r2.remote(0).key ^ 0x5a5a00};
    q.post_write(t.r1, 0, 64, bad, 10, rig::signaled::no);   // fails: reported all the same
    q.post_write(t.r1, 0, 64, t.r2.remote(0), 11);
    q.ring(side::send);
    got = collect(g, 2, 8);
    REQUIRE(got.size() == 2);
    CHECK(got[0].tag == 10u);
    REQUIRE_FALSE(got[0].ok());
    CHECK_FALSE(got[0].failure->flushed);
    CHECK(got[1].tag == 11u);
    REQUIRE_FALSE(got[1].ok());
    CHECK(got[1].failure->flushed);
    std::array<completion, 4> more{};
    CHECK(g.wait(more, 20ms) == 0);
}

TEST_CASE("group: a make_group the firmware refuses part-way gives back what it took (mlx5: CREATE_CQ after the "
          "group's EQ)",
          "[model][group]") {
    two_groups t(4096);
    if (!t.m1.mlx5) {
        WARN("mlx5 only: the bnxt model injects failures on its HWRM channel only; the group's CQ is the RoCE "
             "channel's");
        return;
    }
    const std::size_t objects = t.m1.mlx5->objects();
    t.m1.mlx5->fail_next(static_cast<std::uint16_t>(rig::mlx5::ifc::opcode::create_cq),
                         rig::mlx5::ifc::cmd_status::bad_res_state_err, 0x1234);
    auto refused = t.n1->make_group({.entries = 64});
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().kind == rig::error_kind::firmware);
    CHECK(refused.error().opcode_name == "CREATE_CQ");
    CHECK(refused.error().syndrome == 0x1234u);
    // its EQ destroyed again: the model holds what it held before, and all eight vectors are free
    CHECK(t.m1.mlx5->objects() == objects);
    std::vector<rig::completion_group> groups;
    for (int i = 0; i < 8; ++i) {
        groups.push_back(value(t.n1->make_group({.entries = 64})));
    }
    CHECK_FALSE(t.n1->make_group({.entries = 64}).has_value());
}
