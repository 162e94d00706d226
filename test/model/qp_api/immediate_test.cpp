// SEND and WRITE with immediate data (issue 18) through the API and the model's RC engine, per
// family and across families: the immediate reaches the peer's receive completion (op receive
// for a SEND, write_imm for a WRITE, whose bytes land at its target and not in the receive's
// buffers), for one-packet and many-packet messages; with no receive posted the message waits
// (RNR) and moves nothing until one is; a bad R_Key or a receive too short fail as for WRITE and
// SEND.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cctype>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <catch2/catch.hpp>

#include "rig/group.hpp"
#include "rig/nic.hpp"
#include "rig/qp.hpp"
#include "test/model/qp_api/served_nics.hpp"

namespace {

using namespace std::chrono_literals;
using rig::completion;
using rig::operation;
using rig::side;
using rig::test::ok;
using rig::test::value;

// Two NICs on one wire, a group on each, one queue pair in each group, connected.
struct grouped_pair : rig::test::two_served_functions {
    rig::completion_group g1, g2;
    rig::queue_pair a, b;
    grouped_pair()
        : two_served_functions(1 << 20),
          g1(value(n1->make_group({.entries = 1024, .log_ring_entries = 6}))),
          g2(value(n2->make_group({.entries = 1024, .log_ring_entries = 6}))),
          a(value(n1->make_qp(g1))),
          b(value(n2->make_qp(g2))) {
        ok(a.connect(b.local()));
        ok(b.connect(a.local()));
    }
    ~grouped_pair() {
        (void)a.destroy();
        (void)b.destroy();
        (void)g1.destroy();
        (void)g2.destroy();
    }
};

// The next completion of `g`, waiting at most `bound`; nothing at the bound.
std::optional<completion> next(rig::completion_group& g, std::chrono::microseconds bound = 5s) {
    std::array<completion, 1> one;
    if (g.wait(one, bound) == 0) {
        return std::nullopt;
    }
    return one[0];
}

completion expect_next(rig::completion_group& g) {
    auto c = next(g);
    REQUIRE(c.has_value());
    INFO((c->failure ? c->failure->message : std::string()));
    return *c;
}

// Whether an entry error names `what` in either family's words (mlx5 "remote access error",
// bnxt "REMOTE_ACCESS_ERR"): lower case, '_' as ' '.
bool says(std::string message, std::string_view what) {
    for (char& ch : message) {
        ch = ch == '_' ? ' ' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    return message.find(what) != std::string::npos;
}

void fill(const rig::region& r, std::size_t at, std::size_t n, std::uint8_t seed) {
    for (std::size_t i = 0; i < n; ++i) {
        r.data()[at + i] = std::byte(static_cast<std::uint8_t>(seed + i * 13));
    }
}

}  // namespace

TEST_CASE("immediate: SEND with immediate hands the value to the receive's completion, one packet and many",
          "[model][api][immediate]") {
    grouped_pair t;
    for (const std::size_t n : {std::size_t{0}, std::size_t{64}, std::size_t{10000}}) {
        CAPTURE(n);
        const std::uint32_t imm = 0xdeadbe00u + static_cast<std::uint32_t>(n);
        t.b.receive(t.r2, 200000, 16384, /*tag=*/7);
        fill(t.r1, 0, n, 3);
        t.a.send_imm(t.r1, 0, n, imm, /*tag=*/9);
        const completion s = expect_next(t.g1);
        CHECK(s.ok());
        CHECK(s.op == operation::send_imm);
        CHECK(s.ring == side::send);
        CHECK(s.tag == 9);
        CHECK(s.bytes == n);
        CHECK_FALSE(s.immediate.has_value());   // the sender's own completion carries none
        const completion r = expect_next(t.g2);
        CHECK(r.ok());
        CHECK(r.ring == side::receive);
        CHECK(r.op == operation::receive);
        CHECK(r.tag == 7);
        CHECK(r.bytes == n);
        REQUIRE(r.immediate.has_value());
        CHECK(*r.immediate == imm);
        CHECK(std::memcmp(t.r1.data(), t.r2.data() + 200000, n) == 0);
    }
    // a plain SEND after them: its receive carries no immediate (the label is fresh per post)
    t.b.receive(t.r2, 200000, 64, 8);
    t.a.send(t.r1, 0, 64);
    CHECK(expect_next(t.g1).ok());
    const completion plain = expect_next(t.g2);
    CHECK(plain.op == operation::receive);
    CHECK_FALSE(plain.immediate.has_value());
}

TEST_CASE("immediate: WRITE with immediate lands at its target and completes a receive whose buffers stay untouched",
          "[model][api][immediate]") {
    grouped_pair t;
    for (const std::size_t n : {std::size_t{0}, std::size_t{100}, std::size_t{70000}}) {
        CAPTURE(n);
        const std::uint32_t imm = 0x01020304u ^ static_cast<std::uint32_t>(n);
        std::memset(t.r2.data() + 500000, 0x5a, 256);   // the receive's buffer
        t.b.receive(t.r2, 500000, 256, 11);
        fill(t.r1, 4096, n, 5);
        t.a.write_imm(t.r1, 4096, n, t.r2.remote(8192), imm, 12);
        const completion s = expect_next(t.g1);
        CHECK(s.ok());
        CHECK(s.op == operation::write_imm);
        CHECK(s.bytes == n);
        const completion r = expect_next(t.g2);
        CHECK(r.ok());
        CHECK(r.ring == side::receive);
        CHECK(r.op == operation::write_imm);
        CHECK(r.tag == 11);
        CHECK(r.bytes == n);   // the WRITE's length (verbs: IBV_WC_RECV_RDMA_WITH_IMM's byte_len)
        REQUIRE(r.immediate.has_value());
        CHECK(*r.immediate == imm);
        CHECK(std::memcmp(t.r1.data() + 4096, t.r2.data() + 8192, n) == 0);
        for (std::size_t i = 0; i < 256; ++i) {
            REQUIRE(t.r2.data()[500000 + i] == std::byte{0x5a});
        }
    }
}

TEST_CASE("immediate: with no receive posted a WRITE with immediate waits (RNR) and writes nothing until one is",
          "[model][api][immediate]") {
    grouped_pair t;
    std::memset(t.r2.data(), 0, 64);
    fill(t.r1, 0, 64, 9);
    t.a.write_imm(t.r1, 0, 64, t.r2.remote(0), 0xabcdef01u, 1);
    // RNR NAKs and retries (rnr_retry 7: without end); the responder executes nothing meanwhile
    CHECK_FALSE(next(t.g1, 200ms).has_value());
    CHECK_FALSE(next(t.g2, 1ms).has_value());
    for (std::size_t i = 0; i < 64; ++i) {
        REQUIRE(t.r2.data()[i] == std::byte{0});
    }
    t.b.receive(t.r2, 1000, 16, 2);
    const completion r = expect_next(t.g2);
    CHECK(r.ok());
    CHECK(r.op == operation::write_imm);
    CHECK(*r.immediate == 0xabcdef01u);
    CHECK(expect_next(t.g1).ok());
    CHECK(std::memcmp(t.r1.data(), t.r2.data(), 64) == 0);
}

TEST_CASE("immediate: a WRITE with immediate to a bad key and a SEND with immediate longer than its receive fail "
          "as WRITE and SEND do",
          "[model][api][immediate]") {
    SECTION("bad R_Key: the sender's entry fails with a remote access error, the receive flushes") {
        grouped_pair t;
        t.b.receive(t.r2, 0, 64, 1);
        rig::remote bad = t.r2.remote(0);
        bad.key ^= 0x5500;
        t.a.write_imm(t.r1, 0, 64, bad, 42, 3);
        const completion s = expect_next(t.g1);
        REQUIRE_FALSE(s.ok());
        CHECK(s.op == operation::write_imm);
        CHECK_FALSE(s.failure->flushed);
        CHECK(s.failure->kind == rig::error_kind::entry);
        INFO(s.failure->message);
        CHECK(says(s.failure->message, "remote access"));
        const completion r = expect_next(t.g2);
        REQUIRE_FALSE(r.ok());
        CHECK(r.failure->flushed);
        CHECK_FALSE(r.immediate.has_value());
    }
    SECTION("longer than the receive: a local length error there, a remote invalid request here") {
        grouped_pair t;
        t.b.receive(t.r2, 0, 32, 1);
        t.a.send_imm(t.r1, 0, 64, 42, 3);
        const completion s = expect_next(t.g1);
        REQUIRE_FALSE(s.ok());
        CHECK_FALSE(s.failure->flushed);
        INFO(s.failure->message);
        CHECK(says(s.failure->message, "remote invalid request"));
        const completion r = expect_next(t.g2);
        REQUIRE_FALSE(r.ok());
        CHECK_FALSE(r.failure->flushed);
        CHECK_FALSE(r.immediate.has_value());
        INFO(r.failure->message);
        CHECK(says(r.failure->message, "local length"));
    }
}

TEST_CASE("immediate: the per-queue-pair poll gives a SEND with immediate's length as for SEND; misuse is refused "
          "with nothing posted",
          "[model][api][immediate]") {
    rig::test::two_served_nics t(1 << 16);
    t.b.receive(t.r2, 0, 128);
    t.a.send_imm(t.r1, 0, 100, 77);
    rig::test::expect_done(t.a, side::send, 100);
    rig::test::expect_done(t.b, side::receive, 100);
    const std::uint32_t room = t.a.room(side::send);
    CHECK_THROWS_AS(t.a.write_imm(t.r1, 0, (1 << 16) + 1, t.r2.remote(0), 1), std::invalid_argument);
    CHECK_THROWS_AS(t.a.send_imm(t.r1, 1 << 16, 1, 1), std::invalid_argument);
    CHECK(t.a.room(side::send) == room);
}
