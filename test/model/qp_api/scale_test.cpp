// Many queue pairs at once (issue 17): 1024 queue pairs between two NICs of two functions on one
// wire, every one of them with RDMA WRITEs and SEND/RECEIVEs in flight at the same time. The
// frames they send together are many times what a port's receive queue holds
// (wire::default_port_queue_limit), so the senders must be held back (the wire is lossless, as a
// RoCE fabric with PFC is: wire.hpp) and nothing may be lost for want of room: every completion
// Ok with its own count, every byte at its place, nothing past a message. Then the same with 1 %
// of the frames dropped: go-back-N of many queue pairs at once recovers, nothing lost.
//
// Sizing: 8 messages of 1 B .. 8 KiB per queue pair and round (about 40 000 frames at the path
// MTU), small rings (2^5 entries) so that the two NICs' 2048 queue pairs and 4096 CQs cost little
// memory. A lost tail costs the 67 ms ack timeout, in parallel for all queue pairs.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "rig/nic.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"
#include "sim/roce/wire.hpp"
#include "test/model/qp_api/served_nics.hpp"

namespace {

using namespace std::chrono_literals;
using rig::side;
using rig::test::fill_pattern;
using rig::test::ok;
using rig::test::pattern_mismatch;
using rig::test::served_function;
using rig::test::value;

constexpr std::size_t queue_pairs = 1024;
constexpr std::size_t messages = 8;          // per queue pair and round: even ones WRITEs, odd ones SENDs
constexpr std::size_t message_room = 8192;   // each message's place on both sides
constexpr std::size_t slot = messages * message_room;
constexpr std::byte poison{0xee};

rig::nic_options small_rings() {
    rig::nic_options o;
    o.log_ring_entries = 5;
    return o;
}

// 1 .. message_room - 1 bytes (the last byte of the place stays poison), spread over small and
// multi-packet sizes.
std::size_t size_of(std::uint64_t seed) {
    std::uint64_t x = seed;
    const std::uint64_t r = rig::test::splitmix(x);
    return r % 4 == 0 ? 1 + r % 64 : 1 + (r >> 8) % (message_room - 1);
}

struct many_queue_pairs {
    rig::sim::roce::wire w;
    served_function m1;
    served_function m2;
    std::unique_ptr<rig::nic> n1;
    std::unique_ptr<rig::nic> n2;
    rig::region r1, r2;
    std::vector<rig::queue_pair> a, b;

    many_queue_pairs()
        : m1(0, &w), m2(1, &w), n1(m1.open(small_rings())), n2(m2.open(small_rings())),
          r1(value(n1->allocate(queue_pairs * slot, rig::access::remote))),
          r2(value(n2->allocate(queue_pairs * slot, rig::access::remote))) {
        // Each NIC's control calls on a thread of their own: a firmware command's round trip,
        // not CPU, is what 2048 queue pairs' making and connecting costs (6 commands each).
        // Catch's assertions stay on this thread: each side's first failure is kept as text.
        const auto make = [](rig::nic& n, std::vector<rig::queue_pair>& qps) -> std::string {
            for (std::size_t i = 0; i < queue_pairs; ++i) {
                auto q = n.make_qp();
                if (!q) {
                    return "make_qp " + std::to_string(i) + ": " + q.error().message;
                }
                qps.push_back(std::move(*q));
            }
            return "";
        };
        const auto connect = [](std::vector<rig::queue_pair>& qps, const std::vector<rig::queue_pair>& peers) -> std::string {
            for (std::size_t i = 0; i < queue_pairs; ++i) {
                if (auto c = qps[i].connect(peers[i].local()); !c) {
                    return "connect " + std::to_string(i) + ": " + c.error().message;
                }
            }
            return "";
        };
        a.reserve(queue_pairs);
        b.reserve(queue_pairs);
        std::string failed1, failed2;
        {
            std::thread other([&] { failed2 = make(*n2, b); });
            failed1 = make(*n1, a);
            other.join();
        }
        REQUIRE(failed1 == "");
        REQUIRE(failed2 == "");
        {
            std::thread other([&] { failed2 = connect(b, a); });
            failed1 = connect(a, b);
            other.join();
        }
        REQUIRE(failed1 == "");
        REQUIRE(failed2 == "");
    }

    // One round: every queue pair posts its messages, each ring rung once, before any waits;
    // then each completion in entry order, then the bytes.
    void round(std::uint64_t round_seed) {
        const auto seed = [&](std::size_t i, std::size_t m) { return round_seed * 0x1'0000'0000ull + i * messages + m; };
        for (std::size_t i = 0; i < queue_pairs; ++i) {
            for (std::size_t m = 0; m < messages; ++m) {
                const std::size_t at = i * slot + m * message_room;
                fill_pattern(r1.data() + at, size_of(seed(i, m)), seed(i, m));
                std::memset(r2.data() + at, static_cast<int>(poison), message_room);
            }
        }
        for (std::size_t i = 0; i < queue_pairs; ++i) {
            for (std::size_t m = 1; m < messages; m += 2) {
                b[i].post_receive(r2, i * slot + m * message_room, message_room);
            }
            b[i].ring(side::receive);
        }
        for (std::size_t i = 0; i < queue_pairs; ++i) {
            for (std::size_t m = 0; m < messages; ++m) {
                const std::size_t at = i * slot + m * message_room;
                const std::size_t n = size_of(seed(i, m));
                if (m % 2 == 0) {
                    a[i].post_write(r1, at, n, r2.remote(at));
                } else {
                    a[i].post_send(r1, at, n);
                }
            }
            a[i].ring(side::send);
        }
        for (std::size_t i = 0; i < queue_pairs; ++i) {
            for (std::size_t m = 0; m < messages; ++m) {
                INFO("queue pair " << i << ", message " << m);
                const auto n = static_cast<std::uint32_t>(size_of(seed(i, m)));
                rig::test::expect_done(a[i], side::send, n, 30s);
                if (m % 2 == 1) {
                    rig::test::expect_done(b[i], side::receive, n, 30s);
                }
            }
        }
        std::size_t bad = 0;
        for (std::size_t i = 0; i < queue_pairs; ++i) {
            for (std::size_t m = 0; m < messages; ++m) {
                const std::size_t at = i * slot + m * message_room;
                const std::size_t n = size_of(seed(i, m));
                if (pattern_mismatch(r2.data() + at, n, seed(i, m)) != n || r2.data()[at + n] != poison) {
                    ++bad;
                    UNSCOPED_INFO("queue pair " << i << ", message " << m << " (" << n << " bytes) differs");
                }
            }
        }
        REQUIRE(bad == 0);
        for (std::size_t i = 0; i < queue_pairs; ++i) {   // nothing more: no completion twice
            REQUIRE_FALSE(a[i].poll(side::send).has_value());
            REQUIRE_FALSE(b[i].poll(side::receive).has_value());
        }
    }

    void report(const char* what, std::chrono::steady_clock::duration took) const {
        const auto c = w.counters();
        std::printf("scale (%s): %zu queue pairs x %zu messages in %.3f s; wire so far: %llu frames transmitted, "
                    "%llu delivered, %llu dropped, %llu overflowed, %llu pauses\n",
                    what, queue_pairs, messages, std::chrono::duration<double>(took).count(),
                    static_cast<unsigned long long>(c.transmitted), static_cast<unsigned long long>(c.delivered),
                    static_cast<unsigned long long>(c.dropped), static_cast<unsigned long long>(c.overflow),
                    static_cast<unsigned long long>(c.pauses));
    }
};

}  // namespace

// One test for both: making and connecting 2048 queue pairs costs more than their traffic.
TEST_CASE("scale: 1024 queue pairs between two NICs, WRITE and SEND/RECEIVE all at once; on a lossless wire no "
          "frame is lost, with 1 % of the frames dropped go-back-N of them all recovers; every completion Ok, "
          "every byte there",
          "[model][api][scale]") {
    const auto t0 = std::chrono::steady_clock::now();
    many_queue_pairs t;
    auto t1 = std::chrono::steady_clock::now();
    std::printf("scale: %zu queue pairs made and connected on each NIC in %.3f s\n", queue_pairs,
                std::chrono::duration<double>(t1 - t0).count());
    for (std::uint64_t r = 1; r <= 2; ++r) {
        t.round(r);
    }
    t.report("lossless", std::chrono::steady_clock::now() - t1);
    const auto c = t.w.counters();
    CHECK(c.dropped == 0);
    CHECK(c.overflow == 0);
    CHECK(c.pauses > 0);   // the senders were held back: the rounds asked more than a queue holds
    CHECK(c.delivered == c.transmitted);

    t.w.set_faults({0.01, 0, {}, {}});
    t1 = std::chrono::steady_clock::now();
    for (std::uint64_t r = 3; r <= 4; ++r) {
        t.round(r);
    }
    t.report("1 % dropped", std::chrono::steady_clock::now() - t1);
    t.w.set_faults({});
    const auto d = t.w.counters();
    CHECK(d.dropped > c.dropped);
    CHECK(d.overflow == 0);
    ok(t.n1->close());
    ok(t.n2->close());
}
