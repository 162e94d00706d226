// The queue pair contract on failure (docs/guide.md), through the public API on mlx5 against the
// model: every error completion with the completion's real syndrome in its message
// (abi/mlx5/completion.hpp, mlx5dv.h MLX5_CQE_SYNDROME_*), the order of results around a failure,
// the flush of both rings, a failed queue pair staying failed, and poll/wait sending the firmware
// nothing.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "abi/mlx5/ifc.hpp"
#include "rig/nic.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"
#include "sim/mlx5/datapath.hpp"
#include "sim/roce/wire.hpp"
#include "test/model/qp_api/served_nics.hpp"

namespace {

using namespace std::chrono_literals;
using rig::side;
using rig::test::await_cqes;
using rig::test::expect_done;
using rig::test::expect_failed;
using rig::test::ok;
using rig::test::two_served_nics;
using rig::test::value;
namespace ifc = rig::mlx5::ifc;

using rig::test::failure_kind;

// Ack timeout 14: 4.096 us x 2^14 = 67.1 ms; 7 retries.
constexpr auto ack_timeout = 67ms;

// A fresh pair of connected queue pairs on the two NICs of `t` (a failure fails only its pair).
std::pair<rig::queue_pair, rig::queue_pair> fresh_pair(two_served_nics& t) {
    auto a = value(t.n1->make_qp());
    auto b = value(t.n2->make_qp());
    ok(a.connect(b.local()));
    ok(b.connect(a.local()));
    return {std::move(a), std::move(b)};
}

// The entry failed itself, with this syndrome, whose name the message carries.
void own_failure(const rig::error& e, failure_kind k) {
    const rig::test::expected_failure x = rig::test::expected(k);
    INFO(e.message);
    CHECK_FALSE(e.flushed);
    CHECK(e.syndrome == x.syndrome);
    CHECK_THAT(e.message, Catch::Contains(x.name) && Catch::Contains(" failed: "));
}
// The entry did not fail itself: it carries the failure's error, flushed.
void flushed_by(const rig::error& e, failure_kind k) {
    const char* name = rig::test::expected(k).name;
    INFO(e.message);
    CHECK(e.flushed);
    CHECK_THAT(e.message, Catch::Contains("flushed, the queue pair had failed") && Catch::Contains(name));
}

// An entry of the ring that did not fail, pending when the other ring failed (or posted later):
// it carries the failure's error, flushed, whichever CQ held the NIC's flush CQE for it (the
// driver once let such a flush CQE fail the ring as the entry's own error).
void flushed_by_other_ring(const rig::error& e, failure_kind k) {
    flushed_by(e, k);
}


}  // namespace

// A send longer than the receive it lands in: both queue pairs fail (see the TEST_CASEs below).
void receive_too_small() {
    two_served_nics t(64 * 1024);
    auto &a = t.a, &b = t.b;
    auto &r1 = t.r1, &r2 = t.r2;
    rig::test::fill_pattern(r1.data(), 8192, 1);
    rig::test::fill_pattern(r2.data(), 8192, 2);

    // Before the failure, on both rings of both queue pairs: results the NIC completed and that
    // are taken only after the failure, and entries still waiting.
    const std::uint64_t a_cqes = t.m1.cqes_written();
    const std::uint64_t b_cqes = t.m2.cqes_written();
    a.receive(r1, 16384, 100);            // a R1: takes b's first send, Ok 50
    b.send(r2, 0, 50);                    // b S1: Ok 50
    a.write(r1, 0, 64, r2.remote(20000));  // a W1: Ok 64
    await_cqes(t.m1, a_cqes + 2);
    await_cqes(t.m2, b_cqes + 1);
    b.send(r2, 100, 60);                  // b S2: a has no receive: RNR, retried without end
    b.receive(r2, 32768, 10);             // b R1: too small for a's next send
    b.receive(r2, 40000, 1000);           // b R2: waits, flushed
    a.post_send(r1, 200, 100);            // a S2: 100 bytes into 10: both queue pairs fail
    a.post_write(r1, 300, 64, r2.remote(48000));  // a W3: after the failing entry: flushed
    a.ring(side::send);

    // a: W1 and R1 keep their results, S2 fails, W3 is flushed with S2's error.
    expect_done(a, side::send, 64);
    own_failure(expect_failed(a, side::send), failure_kind::remote_invalid_request);
    flushed_by(expect_failed(a, side::send), failure_kind::remote_invalid_request);
    expect_done(a, side::receive, 50);
    CHECK(std::memcmp(r1.data() + 16384, r2.data(), 50) == 0);
    // b: S1 keeps its result, S2 (waiting for a receive) is flushed with the failure's error;
    // R1 fails with local length, R2 is flushed.
    expect_done(b, side::send, 50);
    flushed_by_other_ring(expect_failed(b, side::send), failure_kind::local_length);
    own_failure(expect_failed(b, side::receive), failure_kind::local_length);
    flushed_by(expect_failed(b, side::receive), failure_kind::local_length);

    // Posted later, on either ring of either: flushed with the failure's error, run by nobody.
    std::memset(r2.data() + 50000, 0x5a, 4096);
    a.write(r1, 0, 4096, r2.remote(50000));
    a.receive(r1, 0, 64);
    b.send(r2, 0, 8);
    b.receive(r2, 0, 64);
    flushed_by(expect_failed(a, side::send), failure_kind::remote_invalid_request);
    flushed_by(expect_failed(a, side::receive), failure_kind::remote_invalid_request);
    flushed_by_other_ring(expect_failed(b, side::send), failure_kind::local_length);
    flushed_by(expect_failed(b, side::receive), failure_kind::local_length);
    CHECK(r2.data()[50000] == std::byte{0x5a});
    CHECK(r2.data()[50000 + 4095] == std::byte{0x5a});
    CHECK(r2.data()[48000] == std::byte{0});  // W3 was not run
    CHECK(value(a.query()).state == rig::qp_status::error);
    CHECK(value(b.query()).state == rig::qp_status::error);
    ok(t.n1->close());
    ok(t.n2->close());
}

TEST_CASE("seed - receive too small: a send longer than the receive it lands in fails the queue pair, and its "
          "peer's; local length error at the receiver, remote invalid request at the sender, both rings of both "
          "flushed",
          "[model][mlx5][api][seed][errors]") {
    receive_too_small();
}

// The failure the NIC reports for a queue pair reaches the NIC's callback before that queue
// pair's destroy returns: the report precedes the DESTROY_QP's completion from the device
// (bnxt: both on the CREQ, handled in CREQ order as bnxt_qplib_service_creq does; mlx5: both on
// the async EQ, a command waiting for its CMD event as the kernel's does), so a queue pair made
// after it, which may reuse its number, never takes it for its own. Which queue pair a remote
// access error makes the NIC report is the family's (bnxt: the requester's
// QP_ERROR_NOTIFICATION; mlx5: the responder's WQ_ACCESS_ERROR, its requester having its error
// CQE only): whichever it is, a report must not come after its destroy. Before the fix the
// bnxt seed test above once failed its third pair with the second's report, handed over late.
TEST_CASE("seed - a failed queue pair's reported failure reaches the NIC's callback before its destroy returns",
          "[model][mlx5][api][seed][errors]") {
    // Each NIC's reports apart: the two functions hand out the same queue pair numbers.
    std::mutex lock;
    std::vector<std::uint32_t> failed[2];
    rig::nic_options o[2];
    for (int k = 0; k < 2; ++k) {
        // Slow on purpose: a destroy that returned once its own completion was polled, not once
        // the report before it was handed over, would return while this sleeps (both families did).
        o[k].qp_event = [&, k](std::uint32_t qp, std::string_view, bool failure) {
            std::this_thread::sleep_for(20ms);
            if (failure) {
                std::lock_guard g(lock);
                failed[k].push_back(qp);
            }
        };
    }
    const auto reported = [&](int k, std::uint32_t qpn) {
        std::lock_guard g(lock);
        return std::find(failed[k].begin(), failed[k].end(), qpn) != failed[k].end();
    };
    rig::test::two_served_functions t(16 * 1024, rig::access::remote, o[0], &o[1]);
    rig::remote bad_key = t.r2.remote(0);
    bad_key.key ^= 0x80;
    for (int i = 0; i < 6; ++i) {
        INFO("pair " << i);
        auto a = value(t.n1->make_qp());
        auto b = value(t.n2->make_qp());
        ok(a.connect(b.local()));
        ok(b.connect(a.local()));
        const std::uint32_t qa = a.number(), qb = b.number();
        a.write(t.r1, 0, 64, bad_key);
        own_failure(expect_failed(a, side::send), failure_kind::remote_access);
        ok(a.destroy());
        const bool a_before = reported(0, qa);
        ok(b.destroy());
        const bool b_before = reported(1, qb);
        std::this_thread::sleep_for(100ms);   // a report handed over late would land by now
        CHECK((a_before || b_before));
        CHECK(reported(0, qa) == a_before);
        CHECK(reported(1, qb) == b_before);
        std::lock_guard g(lock);
        failed[0].clear();
        failed[1].clear();
    }
}

TEST_CASE("seed - an entry fails on a remote access error: a bad key, bytes outside the peer's region, a region "
          "without the remote right",
          "[model][mlx5][api][seed][errors]") {
    two_served_nics t(16 * 1024);
    auto local_only = value(t.n2->allocate(4096, rig::access::local));
    auto read_only = value(t.n2->allocate(4096, rig::access::remote_read));
    auto write_only = value(t.n2->allocate(4096, rig::access::remote_write));
    rig::test::fill_pattern(t.r1.data(), 4096, 3);
    rig::remote bad_key = t.r2.remote(0);
    bad_key.key ^= 0x80;  // another mkey variant: no region has it
    rig::remote beyond = t.r2.remote(t.r2.size() - 8);

    struct attempt {
        const char* what;
        bool read;
        rig::remote to;
        std::size_t bytes;
    };
    const attempt attempts[] = {
        {"write with a bad key", false, bad_key, 64},
        {"read with a bad key", true, bad_key, 64},
        {"write past the region's end", false, beyond, 64},
        {"read past the region's end", true, beyond, 64},
        {"write to a region without remote rights", false, local_only.remote(0), 64},
        {"read of a region without remote rights", true, local_only.remote(0), 64},
        {"write to a region with remote read only", false, read_only.remote(0), 64},
        {"read of a region with remote write only", true, write_only.remote(0), 64},
    };
    for (const attempt& x : attempts) {
        INFO(x.what);
        auto [a, b] = fresh_pair(t);
        if (x.read) {
            a.read(x.to, t.r1, 8192, x.bytes);
        } else {
            a.write(t.r1, 0, x.bytes, x.to);
        }
        own_failure(expect_failed(a, side::send), failure_kind::remote_access);
        a.write(t.r1, 0, 8, t.r2.remote(0));  // stays failed
        flushed_by(expect_failed(a, side::send), failure_kind::remote_access);
        CHECK(value(a.query()).state == rig::qp_status::error);
        CHECK(t.r1.data()[8192] == std::byte{0});  // no byte of a refused read landed
        ok(a.destroy());
        ok(b.destroy());
    }
    // No refused write moved a byte into the peer's memory.
    for (const rig::region* r : {&t.r2, &local_only, &read_only, &write_only}) {
        for (std::size_t i = 0; i < r->size(); ++i) {
            REQUIRE(r->data()[i] == std::byte{0});
        }
    }
    ok(t.n1->close());
    ok(t.n2->close());
}

TEST_CASE("seed - connect: a send to the peer is retried while the peer has posted no receive, without end, "
          "and lands once it posts one",
          "[model][mlx5][api][seed][errors]") {
    two_served_nics t(16 * 1024);
    auto &a = t.a, &b = t.b;
    auto &r1 = t.r1, &r2 = t.r2;
    rig::test::fill_pattern(r1.data(), 1000, 4);
    a.send(r1, 0, 1000);
    // Well past RNR retry 6 x any RNR timer of the model's min_rnr_nak, and past 7 ack timeouts:
    // still no completion.
    CHECK_FALSE(a.wait(side::send, 1200ms).has_value());
    CHECK(a.room(side::send) == rig::test::ring_capacity() - 1);
    b.receive(r2, 4096, 2000);
    expect_done(a, side::send, 1000);
    expect_done(b, side::receive, 1000);
    CHECK(rig::test::pattern_mismatch(r2.data() + 4096, 1000, 4) == 1000);
    CHECK(value(a.query()).state == rig::qp_status::rts);
    ok(t.n1->close());
    ok(t.n2->close());
}

TEST_CASE("seed - connect: a send the peer does not acknowledge is retried 7 times, each after 67 ms, before "
          "its completion fails (the peer destroyed, its function dead, or the link down)",
          "[model][mlx5][api][seed][errors]") {
    rig::nic_options o;
    // Closing the NIC of a dead function waits this long, once. It bounds every command of the
    // test too, the connects included: 300 ms was once too short for an INIT2RTR on a loaded
    // 2-CPU CI host (fresh-clone run at 78eb748); teardown_test.cpp takes 2 s for the same.
    o.command_timeout = 2s;
    two_served_nics t(16 * 1024, rig::access::remote, o);
    rig::test::fill_pattern(t.r1.data(), 4096, 6);

    const auto fails_in_time = [&](rig::queue_pair& a, bool send) {
        const auto t0 = std::chrono::steady_clock::now();
        if (send) {
            a.send(t.r1, 0, 100);
        } else {
            a.write(t.r1, 0, 4096, t.r2.remote(0));
        }
        const rig::error e = expect_failed(a, side::send, 3s);
        const auto took = std::chrono::steady_clock::now() - t0;
        INFO(e.message << " after " << std::chrono::duration<double>(took).count() << " s");
        own_failure(e, failure_kind::retry_exceeded);
        CHECK(took >= 7 * ack_timeout);
        CHECK(took < 8 * ack_timeout + 1s);
        a.write(t.r1, 0, 8, t.r2.remote(0));
        flushed_by(expect_failed(a, side::send), failure_kind::retry_exceeded);
    };

    SECTION("the peer destroyed") {
        auto [a, b] = fresh_pair(t);
        t.r2.data()[0] = std::byte{0x77};
        ok(b.destroy());
        fails_in_time(a, false);
        CHECK(t.r2.data()[0] == std::byte{0x77});
    }
    SECTION("every frame lost: the link down between them") {
        auto [a, b] = fresh_pair(t);
        t.w.set_faults({1.0, 0, {}, {}});
        fails_in_time(a, true);
        t.w.set_faults({});
        CHECK(t.w.counters().dropped > 0);
        static_cast<void>(b);
    }
    SECTION("the peer's function dead") {
        auto [a, b] = fresh_pair(t);
        t.m2.die();
        fails_in_time(a, false);
        static_cast<void>(b);
        static_cast<void>(t.n2->close());  // completes locally: the function answers nothing
        CHECK(t.n2->closed());
    }
    ok(t.n1->close());
    static_cast<void>(t.n2->close());
}

TEST_CASE("seed - connect: a send the peer does not acknowledge fails when the peer's port goes down "
          "(PORT_CHANGE DOWN)",
          "[model][mlx5][api][seed][errors][.known]") {
    // KNOWN MODEL GAP: function_model::set_port_state(false) changes only the firmware's link
    // state (QUERY_VPORT_STATE, PORT_CHANGE event); sim/mlx5/datapath.cpp never looks at it, so
    // a port that is down still sends and receives frames. A card with its link down moves no
    // frame: the sender's entry should fail with RETRY_EXC after 7 x 67 ms.
    two_served_nics t(16 * 1024);
    REQUIRE(t.m2.set_link(false));
    t.a.write(t.r1, 0, 64, t.r2.remote(0));
    const rig::error e = expect_failed(t.a, side::send, 3s);
    own_failure(e, failure_kind::retry_exceeded);
    CHECK(t.r2.data()[0] == std::byte{0});
    ok(t.n1->close());
    ok(t.n2->close());
}

// Failure and flush order around an entry that fails (see the TEST_CASEs below).
void failure_order() {
    two_served_nics t(64 * 1024);
    auto &a = t.a, &b = t.b;
    auto &r1 = t.r1, &r2 = t.r2;
    rig::test::fill_pattern(r1.data(), 16384, 8);
    rig::remote bad_key = r2.remote(0);
    bad_key.key ^= 0x80;

    a.receive(r1, 32768, 64);                     // R1: b never sends: flushed by the failure
    a.receive(r1, 33000, 64);                     // R2: likewise
    a.post_write(r1, 0, 100, r2.remote(0));       // W1: Ok
    a.post_write(r1, 100, 200, r2.remote(100));   // W2: Ok
    a.post_write(r1, 300, 64, bad_key);           // W3: remote access error
    a.post_write(r1, 400, 4000, r2.remote(400));  // W4: flushed, its bytes never land
    a.post_read(r2.remote(8000), r1, 40000, 64);  // R5: flushed
    a.ring(side::send);

    const std::uint64_t commands = t.m1.commands_completed();
    expect_done(a, side::send, 100);
    {
        auto c = a.poll(side::send);  // W2 by poll, once it is there
        for (int i = 0; !c && i < 5000; ++i) {
            std::this_thread::sleep_for(1ms);
            c = a.poll(side::send);
        }
        REQUIRE(c.has_value());
        REQUIRE(c->has_value());
        CHECK(**c == 200);
    }
    own_failure(expect_failed(a, side::send), failure_kind::remote_access);
    flushed_by(expect_failed(a, side::send), failure_kind::remote_access);
    flushed_by(expect_failed(a, side::send), failure_kind::remote_access);
    flushed_by_other_ring(expect_failed(a, side::receive), failure_kind::remote_access);
    {
        auto c = a.poll(side::receive);  // R2: already failed, poll gives it at once
        REQUIRE(c.has_value());
        REQUIRE_FALSE(c->has_value());
        flushed_by_other_ring(c->error(), failure_kind::remote_access);
    }
    CHECK(a.room(side::send) == rig::test::ring_capacity());
    CHECK(a.room(side::receive) == rig::test::ring_capacity());
    CHECK(std::memcmp(r2.data(), r1.data(), 300) == 0);  // W1, W2 moved their bytes
    CHECK(r2.data()[400 + 3999] == std::byte{0});         // W4: the last byte never landed

    // Stays failed: every later post completes with the failure's error, on both rings, and
    // the NIC runs none of them.
    for (int round = 0; round < 3; ++round) {
        a.write(r1, 0, 64, r2.remote(60000));
        a.receive(r1, 0, 64);
        flushed_by(expect_failed(a, side::send), failure_kind::remote_access);
        flushed_by_other_ring(expect_failed(a, side::receive), failure_kind::remote_access);
    }
    CHECK(r2.data()[60000] == std::byte{0});
    CHECK_FALSE(a.poll(side::send).has_value());
    CHECK(t.m1.commands_completed() == commands);  // every poll and wait: no command
    CHECK(value(a.query()).state == rig::qp_status::error);
    CHECK(t.m1.commands_completed() == commands + 1);  // query is a command, the only one
    static_cast<void>(b);
    ok(t.n1->close());
    ok(t.n2->close());
}

TEST_CASE("seed - failure order: completions keep the order of the entries; those completed before the failure "
          "keep their result, the failing one its error, the rest of both rings the failure's error; a failed "
          "queue pair stays failed; poll and wait send the firmware no request, a failure's included",
          "[model][mlx5][api][seed][errors]") {
    failure_order();
}
