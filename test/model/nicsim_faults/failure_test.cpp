// Failures rig-nicsim injects, met through the public API: a link that goes down (SIGUSR1 at
// a moment the test picks, or --link-down-after-ms), a function that dies for good
// (--function-dies-after-ms) or by the firmware-level die fault, and the whole model process
// killed (--die-after-ms). Seed (rig_bnxt_qp.txt): a send the peer does not acknowledge is
// retried 7 times, each after 67 ms, before its completion fails; a queue pair fails when the
// NIC's machine fails.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>

#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>

#include "abi/mlx5/completion.hpp"
#include "sim/mlx5/datapath.hpp"
#include "test/model/nicsim_faults/nicsim_nics.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using rig::test::expect_done;
using rig::test::expect_failed;
using rig::test::fill_pattern;
using rig::test::pattern_mismatch;
using rig::test::value;

constexpr auto ack_timeout = 67ms;  // 4.096 us x 2^14, the API's connect
constexpr std::byte untouched{0xee};

// The send `posted` at that time failed with retry exceeded, within the seed's bounds.
void expect_retry_exceeded(rig::queue_pair& q, clock_type::time_point posted) {
    const rig::error e = expect_failed(q, rig::side::send, 5s);
    const auto took = clock_type::now() - posted;
    INFO(e.message << " after " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
    CHECK(e.syndrome == rig::test::expected(rig::test::failure_kind::retry_exceeded).syndrome);
    CHECK_FALSE(e.flushed);
    CHECK(took >= 7 * ack_timeout);
    CHECK(took <= 8 * ack_timeout + 1s);
}

// A new queue pair on each NIC, connected: a send lands intact.
void new_pair_works(rig::test::nicsim_nics& t) {
    auto a = value(t.n0->make_qp());
    auto b = value(t.n1->make_qp());
    rig::test::ok(a.connect(b.local()));
    rig::test::ok(b.connect(a.local()));
    fill_pattern(t.r0.data() + 4096, 5000, 99);
    b.receive(t.r1, 16384, 8192);
    a.send(t.r0, 4096, 5000);
    expect_done(a, rig::side::send, 5000);
    expect_done(b, rig::side::receive, 5000);
    CHECK(pattern_mismatch(t.r1.data() + 16384, 5000, 99) == 5000);
}

// The oldest due entry of the dead NIC's ring fails with the machine's failure.
void expect_machine_failed(rig::queue_pair& q, rig::side s) {
    auto r = q.wait(s, 3s);
    REQUIRE(r.has_value());
    REQUIRE_FALSE(r->has_value());
    INFO(r->error().message);
    CHECK(r->error().message.find("NIC failed") != std::string::npos);
}

// A dead NIC's close completes without the firmware, keeping what the firmware may name.
void expect_closed_stranded(rig::nic& n) {
    const auto t0 = clock_type::now();
    static_cast<void>(n.close());  // its result names the dead firmware, or nothing
    CHECK(clock_type::now() - t0 < 5s);
    CHECK(n.closed());
    CHECK_FALSE(n.stranded().empty());
}

std::array<std::byte, 6> bytes_of(const std::array<std::uint8_t, 6>& m) {
    std::array<std::byte, 6> out{};
    std::transform(m.begin(), m.end(), out.begin(), [](std::uint8_t b) { return std::byte{b}; });
    return out;
}

// Frames the function with `mac` sent at or after `from_us` (and before), and frames sent to
// it from then on.
struct after_death {
    std::size_t sent_before = 0, sent_after = 0, received_after = 0;
};
after_death count_frames(const std::string& pcap, const std::array<std::byte, 6>& mac, std::int64_t from_us) {
    after_death c;
    for (const auto& f : rig::test::read_pcap(pcap)) {
        if (f.src() == mac) {
            ++(f.us >= from_us ? c.sent_after : c.sent_before);
        } else if (f.dst() == mac && f.us >= from_us) {
            ++c.received_after;
        }
    }
    return c;
}

}  // namespace

TEST_CASE("rig-nicsim SIGUSR1: the link goes down during a send, which fails with retry exceeded after 7 x 67 ms; "
          "back up, a new queue pair works",
          "[model][mlx5][nicsim][datapath-faults]") {
    rig::test::nicsim_process sim({"--fault-function", "1"});
    rig::test::nicsim_nics t(sim, 64 * 1024);
    fill_pattern(t.r0.data(), 4096, 1);
    const auto posted = clock_type::now();
    t.a.send(t.r0, 0, 4096);  // b posted no receive: RNR NAKs, retried without end
    CHECK_FALSE(t.a.wait(rig::side::send, 100ms).has_value());
    const std::size_t mark = sim.output().size();
    sim.signal(SIGUSR1);
    REQUIRE(sim.wait_for("link down for function 1", 2s, mark));
    expect_retry_exceeded(t.a, posted);

    sim.signal(SIGUSR1);
    REQUIRE(sim.wait_for("link up for function 1", 2s, mark));
    new_pair_works(t);
    rig::test::ok(t.n0->close());
    rig::test::ok(t.n1->close());
    CHECK(sim.stop() == 0);
}

TEST_CASE("rig-nicsim --link-down-after-ms, --link-up-after-ms: a write while every link is down fails with "
          "retry exceeded; once up, a new queue pair works",
          "[model][mlx5][nicsim][datapath-faults]") {
    rig::test::nicsim_process sim({"--link-down-after-ms", "1200", "--link-up-after-ms", "2000"});
    rig::test::nicsim_nics t(sim, 64 * 1024);
    INFO(sim.output());
    REQUIRE(sim.output().find("link down") == std::string::npos);  // set up before the fault
    fill_pattern(t.r0.data(), 100, 2);
    t.a.write(t.r0, 0, 100, t.r1.remote(0));
    expect_done(t.a, rig::side::send, 100);
    REQUIRE(sim.wait_for("link down for every function (--link-down-after-ms)", 3s));
    CHECK(clock_type::now() - sim.served_at >= 1150ms);  // served_at is the test's view of the start
    const auto posted = clock_type::now();
    t.a.write(t.r0, 0, 100, t.r1.remote(0));
    expect_retry_exceeded(t.a, posted);
    REQUIRE(sim.wait_for("link up for every function (--link-up-after-ms)", 3s));
    new_pair_works(t);
    rig::test::ok(t.n0->close());
    rig::test::ok(t.n1->close());
    CHECK(sim.stop() == 0);
}

TEST_CASE("rig-nicsim --function-dies-after-ms: a send to the dead function fails with retry exceeded, its own "
          "calls report the failure, its data path sends, writes and completes nothing",
          "[model][mlx5][nicsim][datapath-faults]") {
    rig::test::temp_socket where;
    const std::string pcap = where.dir + "/wire.pcap";
    rig::test::nicsim_process sim({"--fault-function", "1", "--function-dies-after-ms", "1500", "--capture", pcap});
    std::int64_t dead_us = 0;
    {
        rig::test::nicsim_nics t(sim, 64 * 1024);
        INFO(sim.output());
        REQUIRE(sim.output().find("died") == std::string::npos);  // set up before the fault
        // b's send to a, which has posted no receive: b's data path sends it again after each
        // RNR NAK until the function dies
        fill_pattern(t.r1.data(), 4096, 3);
        t.b.send(t.r1, 0, 4096);
        // b's receive, which a's send would fill: a dead function writes no memory
        std::fill(t.r1.data() + 8192, t.r1.data() + 12288, untouched);
        t.b.receive(t.r1, 8192, 4096);
        REQUIRE(sim.wait_for("function 1 died for good (--function-dies-after-ms)", 5s));
        dead_us = rig::test::system_us();

        fill_pattern(t.r0.data(), 4096, 4);
        const auto posted = clock_type::now();
        t.a.send(t.r0, 0, 4096);
        expect_retry_exceeded(t.a, posted);
        CHECK(std::all_of(t.r1.data() + 8192, t.r1.data() + 12288, [](std::byte x) { return x == untouched; }));

        expect_machine_failed(t.b, rig::side::send);
        expect_machine_failed(t.b, rig::side::receive);
        CHECK_FALSE(t.n1->make_qp().has_value());  // the firmware answers nothing: an error, not a hang
        expect_closed_stranded(*t.n1);
        CHECK(std::filesystem::exists(sim.socket(1)));  // still served: a silent device, not a closed socket
        // dead for good: the reset that a closed connection brings (the server serves one client
        // at a time: the NIC object goes, and its connection with it) does not revive it
        t.n1.reset();  // b and r1 are not used again
        rig::nic_options o = rig::test::quick_failure_options();
        o.ready_timeout = 60s;  // the all-ones read fails at once, not at the limit
        const auto t0 = clock_type::now();
        auto again = rig::nic::open(sim.where(1), o);
        REQUIRE_FALSE(again.has_value());
        INFO(again.error().message);
        CHECK_THAT(again.error().message, Catch::Contains("reads all ones"));
        CHECK(clock_type::now() - t0 < 3s);
    }
    CHECK(sim.stop() == 0);
    const after_death c = count_frames(pcap, rig::test::nicsim_mac(1), dead_us);
    CHECK(c.sent_before > 0);     // the send and its retries after RNR NAKs
    CHECK(c.sent_after == 0);     // no retry, no ack, no read response once dead
    CHECK(c.received_after > 0);  // a's send and its 7 retries, into a link that is down
}

TEST_CASE("the firmware-level die fault (--fault-die, function_model::die) stops the function's data path too",
          "[model][mlx5][nicsim]") {
    rig::test::temp_socket where;
    const std::string pcap = where.dir + "/wire.pcap";
    rig::sim::roce::wire w;
    REQUIRE(w.capture(pcap));
    rig::test::served_mlx5 m0(rig::test::quick_model(0), &w), m1(rig::test::quick_model(1), &w);
    auto n0 = m0.open(rig::test::quick_failure_options());
    auto n1 = m1.open(rig::test::quick_failure_options());
    auto r0 = value(n0->allocate(64 * 1024, rig::access::remote));
    auto r1 = value(n1->allocate(64 * 1024, rig::access::remote));
    auto a = value(n0->make_qp());
    auto b = value(n1->make_qp());
    rig::test::ok(a.connect(b.local()));
    rig::test::ok(b.connect(a.local()));
    // b's send RNR-NAKed and sent again until the death; b's receive that a's send would fill
    fill_pattern(r1.data(), 4096, 5);
    b.send(r1, 0, 4096);
    std::fill(r1.data() + 8192, r1.data() + 12288, untouched);
    b.receive(r1, 8192, 4096);
    const rig::sim::mlx5::datapath& dp = *m1.fn.data_path();
    const auto t0 = clock_type::now();
    while (dp.wqes_fetched() == 0) {  // b's send is on its way
        REQUIRE(clock_type::now() - t0 < 5s);
        std::this_thread::sleep_for(1ms);
    }
    CHECK_FALSE(b.wait(rig::side::send, 50ms).has_value());  // RNR NAKed, sent again, without end
    const std::uint64_t wqes = dp.wqes_fetched(), cqes = dp.cqes_written();
    m1.fn.die();
    const std::int64_t dead_us = rig::test::system_us();
    const auto posted = clock_type::now();
    fill_pattern(r0.data(), 4096, 6);
    a.send(r0, 0, 4096);
    expect_retry_exceeded(a, posted);
    CHECK(dp.wqes_fetched() == wqes);
    CHECK(dp.cqes_written() == cqes);
    CHECK(std::all_of(r1.data() + 8192, r1.data() + 12288, [](std::byte x) { return x == untouched; }));
    expect_machine_failed(b, rig::side::send);
    expect_closed_stranded(*n1);
    REQUIRE(w.capture(""));
    const after_death c = count_frames(pcap, bytes_of(m1.fn.mac()), dead_us);
    CHECK(c.sent_before > 0);
    CHECK(c.sent_after == 0);
    CHECK(c.received_after > 0);
}

TEST_CASE("rig-nicsim --die-after-ms: the model process is killed; calls on both NICs report the NIC's machine "
          "failure and close returns",
          "[model][mlx5][nicsim][datapath-faults]") {
    rig::test::nicsim_process sim({"--die-after-ms", "1500"});
    rig::test::nicsim_nics t(sim, 64 * 1024);
    INFO(sim.output());
    REQUIRE(sim.output().find("dies now") == std::string::npos);  // set up before the fault
    fill_pattern(t.r0.data(), 100, 7);
    t.a.write(t.r0, 0, 100, t.r1.remote(0));
    expect_done(t.a, rig::side::send, 100);
    t.a.receive(t.r0, 4096, 4096);
    t.b.receive(t.r1, 4096, 4096);

    const int status = sim.wait_exit(5s);
    REQUIRE(status >= 0);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGKILL);
    CHECK(std::filesystem::exists(sim.socket(0)));  // left behind, as a crash leaves them
    CHECK(std::filesystem::exists(sim.socket(1)));

    expect_machine_failed(t.a, rig::side::receive);
    expect_machine_failed(t.b, rig::side::receive);
    t.a.write(t.r0, 0, 100, t.r1.remote(0));  // a failed queue pair stays failed
    auto later = t.a.wait(rig::side::send, 1s);
    REQUIRE(later.has_value());
    CHECK_FALSE(later->has_value());
    const auto t0 = clock_type::now();
    CHECK_FALSE(t.n0->make_qp().has_value());
    CHECK_FALSE(t.b.destroy().has_value());
    CHECK(clock_type::now() - t0 < 3s);  // errors, not waits on a server that is gone
    for (rig::nic* n : {t.n0.get(), t.n1.get()}) {
        const auto c0 = clock_type::now();
        static_cast<void>(n->close());
        CHECK(clock_type::now() - c0 < 5s);
        CHECK(n->closed());
    }
}
