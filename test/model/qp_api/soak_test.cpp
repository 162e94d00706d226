// Data integrity through the public API (issue 5's soak): two NICs of two functions on one wire
// that loses and duplicates frames, mixed RDMA WRITE, inline WRITE, SEND/RECEIVE and RDMA READ
// of 1 B to 1 MiB, each payload a seeded pseudo-random pattern made again at the destination to
// check it. Nothing lost (every completion Ok, every byte there), nothing duplicated (each
// receive takes exactly one message, in order; no receive takes a message twice; no byte lands
// past its message).
//
// Sizing: the RC engine recovers a lost packet inside a message at once (a PSN-sequence NAK),
// but a lost last packet, ACK or NAK costs the 67 ms ack timeout (connect's ack timeout 14), so
// the run time is mostly (messages x their chance of a lost tail) x 67 ms: a few hundred
// messages keep the test within seconds on two cores.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <span>
#include <string>
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
using rig::test::expect_done;
using rig::test::fill_pattern;
using rig::test::ok;
using rig::test::pattern_mismatch;
using rig::test::two_served_nics;

enum class kind : std::uint8_t { write, write_inline, send, read };
constexpr std::byte poison{0xee};
constexpr std::size_t region_bytes = std::size_t{4} << 20;
constexpr std::size_t mib = std::size_t{1} << 20;

struct op {
    kind k;
    std::size_t n;
    std::size_t at1;  // bytes of a's region: the source, or a read's destination
    std::size_t at2;  // bytes of b's region: the destination, or a read's source
    std::size_t room; // a send's receive: n plus some
    std::uint64_t seed;
};

// 1 B .. 1 MiB, weighted to small: 60 % up to 256 B, 25 % up to 16 KiB, 12 % up to 256 KiB,
// 3 % up to 1 MiB; every 40th op from 512 KiB to 1 MiB.
std::size_t draw_size(std::mt19937_64& rng, std::size_t index) {
    const auto in = [&](std::size_t lo, std::size_t hi) { return lo + rng() % (hi - lo + 1); };
    if (index % 40 == 39) {
        return in(mib / 2, mib);
    }
    const auto r = rng() % 100;
    if (r < 60) {
        return in(1, 256);
    }
    if (r < 85) {
        return in(257, 16384);
    }
    if (r < 97) {
        return in(16385, 256 * 1024);
    }
    return in(256 * 1024 + 1, mib);
}

std::size_t up64(std::size_t n) { return (n + 63) & ~std::size_t{63}; }

}  // namespace

TEST_CASE("soak: mixed WRITE, inline WRITE, SEND/RECEIVE and READ of 1 B to 1 MiB between two NICs, 1.5 % of "
          "frames dropped and 1 % duplicated; every byte checked, nothing lost, nothing duplicated",
          "[model][mlx5][api][soak]") {
    constexpr std::size_t total_ops = 1000;
    constexpr std::size_t batch_ops = 32;
    two_served_nics t(region_bytes);
    auto &a = t.a, &b = t.b;
    auto &r1 = t.r1, &r2 = t.r2;
    t.w.set_faults({0.015, 0.01, {}, {}});
    std::mt19937_64 rng(0x50a6'5eed);

    std::size_t counts[4] = {};
    std::size_t bytes = 0, large = 0, messages_received = 0;
    std::vector<op> batch;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t next = 0; next < total_ops;) {
        // A batch: up to 32 ops whose bytes do not overlap on either side, one doorbell per ring.
        batch.clear();
        std::size_t c1 = 0, c2 = 0;
        while (batch.size() < batch_ops && next < total_ops) {
            op o{};
            o.k = static_cast<kind>(rng() % 4);
            o.n = draw_size(rng, next);
            if (o.k == kind::write_inline) {
                o.n = 1 + o.n % t.a.max_inline();
            }
            o.room = o.k == kind::send ? o.n + rng() % 64 : o.n;
            if (c1 + o.n > region_bytes || c2 + o.room + 1 > region_bytes) {
                break;  // the regions are full: this op starts the next batch
            }
            o.at1 = c1;
            o.at2 = c2;
            c1 = up64(c1 + o.n);
            c2 = up64(c2 + o.room + 1);
            o.seed = rng();
            batch.push_back(o);
            ++next;
        }
        for (const op& o : batch) {
            switch (o.k) {
            case kind::write:
                fill_pattern(r1.data() + o.at1, o.n, o.seed);
                std::memset(r2.data() + o.at2, 0xee, o.n + 1);
                a.post_write(r1, o.at1, o.n, r2.remote(o.at2));
                break;
            case kind::write_inline: {
                std::vector<std::byte> data(o.n);   // up to max_inline(): 28 on mlx5, 96 on bnxt
                fill_pattern(data.data(), o.n, o.seed);
                std::memset(r2.data() + o.at2, 0xee, o.n + 1);
                a.post_write_inline(std::span<const std::byte>(data.data(), o.n), r2.remote(o.at2));
                break;
            }
            case kind::send:
                fill_pattern(r1.data() + o.at1, o.n, o.seed);
                std::memset(r2.data() + o.at2, 0xee, o.room + 1);
                b.post_receive(r2, o.at2, o.room);
                a.post_send(r1, o.at1, o.n);
                break;
            case kind::read:
                fill_pattern(r2.data() + o.at2, o.n, o.seed);
                std::memset(r1.data() + o.at1, 0xee, o.n);
                a.post_read(r2.remote(o.at2), r1, o.at1, o.n);
                break;
            }
        }
        b.ring(side::receive);
        a.ring(side::send);
        // Completions in entry order, each Ok with its own count; then the bytes.
        for (const op& o : batch) {
            INFO("op kind " << int(o.k) << ", " << o.n << " bytes");
            expect_done(a, side::send, static_cast<std::uint32_t>(o.n), 30s);
            if (o.k == kind::send) {
                expect_done(b, side::receive, static_cast<std::uint32_t>(o.n), 30s);
                ++messages_received;
            }
            if (o.k == kind::read) {
                REQUIRE(pattern_mismatch(r1.data() + o.at1, o.n, o.seed) == o.n);
            } else {
                REQUIRE(pattern_mismatch(r2.data() + o.at2, o.n, o.seed) == o.n);
                REQUIRE(r2.data()[o.at2 + o.n] == poison);  // nothing past the message
            }
            ++counts[static_cast<int>(o.k)];
            bytes += o.n;
            large += o.n >= mib / 2 ? 1 : 0;
        }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // Nothing duplicated: no message is left over for a further receive, no completion either.
    CHECK_FALSE(a.poll(side::send).has_value());
    CHECK_FALSE(b.poll(side::receive).has_value());
    b.receive(r2, 0, 4096);
    CHECK_FALSE(b.wait(side::receive, 200ms).has_value());
    t.w.set_faults({});

    const auto w = t.w.counters();
    std::printf("soak: %zu ops (%zu write, %zu inline write, %zu send, %zu read; %zu of 512 KiB .. 1 MiB), "
                "%zu messages received, %.1f MiB in %.2f s; wire: %llu frames transmitted, %llu dropped, "
                "%llu duplicated, %llu delivered\n",
                total_ops, counts[0], counts[1], counts[2], counts[3], large, messages_received,
                double(bytes) / double(mib), seconds, static_cast<unsigned long long>(w.transmitted),
                static_cast<unsigned long long>(w.dropped), static_cast<unsigned long long>(w.duplicated),
                static_cast<unsigned long long>(w.delivered));
    CHECK(counts[0] + counts[1] + counts[2] + counts[3] == total_ops);
    CHECK(large >= 20);  // every 40th op, and 3 % of the rest
    CHECK(w.dropped > 0);
    CHECK(w.duplicated > 0);
    CHECK(messages_received == counts[2]);
    ok(t.n1->close());
    ok(t.n2->close());
}
