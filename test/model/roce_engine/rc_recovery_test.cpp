// sim/roce RC recovery, one lost frame at a time (the switch drops what a port receives while
// its drop probability is 1): a PSN gap gets one sequence NAK then silence until the expected
// PSN; a lost ACK makes the requester resend and the responder ACK the duplicate again without
// executing it twice; a lost READ response makes the responder execute the duplicate READ again;
// among many queue pairs, a timer acts in the first poll at its deadline.
#include "test/model/roce_engine/fabric.hpp"

using namespace rig::test::roce;
namespace sr = rig::sim::roce;

namespace {

struct pair {
    sr::wire w;
    function fa{w, 1, 3 * mib}, fb{w, 2, 3 * mib};
    sr::rc_qp& a = fa.make_qp(0x101);
    sr::rc_qp& b = fb.make_qp(0x202);
    explicit pair(const link_options& o) {
        for (function* f : {&fa, &fb}) {
            f->reg(lkey, 0, mib, sr::access_local_write);
            f->reg(rkey, mib, mib, sr::access_local_write | sr::access_remote_read | sr::access_remote_write);
            f->reg(rcvkey, 2 * mib, mib, sr::access_local_write);
            fill_random(f->at(0, 3 * mib), f == &fa ? 1 : 2);
        }
        connect(a, fa, b, fb, o);
    }
    static void lose(function& f, bool on) { f.port->set_faults({on ? 1.0 : 0.0, 0, {}, {}}); }
    std::vector<sr::completion> sends_of_a(std::size_t n) {
        std::vector<sr::completion> done;
        REQUIRE(run_until({&fa, &fb}, [&] {
            auto x = take_all(a, sr::completion_side::send);
            done.insert(done.end(), x.begin(), x.end());
            return done.size() >= n;
        }));
        return done;
    }
};

}  // namespace

TEST_CASE("a PSN gap gets one sequence-error NAK, silence until the expected PSN, and a go-back-N that completes all") {
    pair p({.mtu = 1024, .timeout = 16});   // 268 ms: no ack timeout in this test
    REQUIRE(p.b.post_receive(receive(1, rcvkey, function::va(2 * mib), 100)));
    REQUIRE(p.a.post_send(request(sr::work_op::send, 1, lkey, function::va(0), 100)));
    pair::lose(p.fb, true);
    p.fa.eng->poll(clock::now());   // the SEND ONLY is lost
    pair::lose(p.fb, false);
    REQUIRE(p.a.post_send(request(sr::work_op::write, 2, lkey, function::va(4096), 5000, rkey, function::va(mib))));
    p.fa.eng->poll(clock::now());   // WRITE FIRST .. LAST: 5 packets after the gap
    p.fb.eng->poll(clock::now());
    CHECK(p.b.counters().out_of_sequence == 5);
    CHECK(p.b.counters().seq_naks_sent == 1);
    const auto done = p.sends_of_a(2);
    CHECK(done[0].status == sr::completion_status::success);
    CHECK(done[1].status == sr::completion_status::success);
    CHECK(p.a.counters().seq_naks_received == 1);
    CHECK(p.a.counters().retransmitted == 6);
    CHECK(p.a.counters().timeouts == 0);
    CHECK(p.b.counters().seq_naks_sent == 1);
    CHECK(checksum(p.fb.at(mib, 5000)) == checksum(p.fa.at(4096, 5000)));
    const auto r = take_all(p.b, sr::completion_side::receive);
    REQUIRE(r.size() == 1);
    CHECK(r[0].byte_len == 100);
}

TEST_CASE("a lost ACK: the requester resends after the ack timeout, the responder ACKs the duplicate and runs it once") {
    pair p({.timeout = 8});   // 1 ms
    REQUIRE(p.b.post_receive(receive(1, rcvkey, function::va(2 * mib), 4096)));
    REQUIRE(p.b.post_receive(receive(2, rcvkey, function::va(2 * mib + 4096), 4096)));
    REQUIRE(p.a.post_send(request(sr::work_op::send, 1, lkey, function::va(0), 3000)));
    p.fa.eng->poll(clock::now());
    pair::lose(p.fa, true);
    p.fb.eng->poll(clock::now());   // executes the SEND; its ACK is lost
    pair::lose(p.fa, false);
    const auto done = p.sends_of_a(1);
    CHECK(done[0].status == sr::completion_status::success);
    CHECK(p.a.counters().timeouts >= 1);
    CHECK(p.b.counters().duplicates_received >= 3);
    // executed once: one receive consumed, the second still posted
    const auto r = take_all(p.b, sr::completion_side::receive);
    REQUIRE(r.size() == 1);
    CHECK(r[0].index == 1);
    CHECK(p.b.receive_room() == 255);
}

TEST_CASE("a lost READ response: the requester asks again and the responder executes the duplicate READ again") {
    pair p({.mtu = 1024, .timeout = 8});
    REQUIRE(p.a.post_send(request(sr::work_op::read, 1, lkey, function::va(0), 3000, rkey, function::va(mib + 10))));
    p.fa.eng->poll(clock::now());
    // change the source after the first execution: the answer to the duplicate carries the new bytes
    pair::lose(p.fa, true);
    p.fb.eng->poll(clock::now());   // three responses, all lost
    pair::lose(p.fa, false);
    fill_random(p.fb.at(mib + 10, 3000), 42);
    const auto done = p.sends_of_a(1);
    CHECK(done[0].status == sr::completion_status::success);
    CHECK(done[0].byte_len == 3000);
    CHECK(p.b.counters().duplicates_received == 1);
    CHECK(checksum(p.fa.at(0, 3000)) == checksum(p.fb.at(mib + 10, 3000)));
}

TEST_CASE("SEND gathers from several pieces and scatters into a receive of several pieces") {
    pair p({.mtu = 256});
    sr::send_request s = request(sr::work_op::send, 1, lkey, function::va(100), 300);
    s.sge_count = 3;
    s.sg[1] = {.va = function::va(5000), .key = lkey, .length = 1};
    s.sg[2] = {.va = function::va(9000), .key = lkey, .length = 700};
    sr::receive_request r = receive(1, rcvkey, function::va(2 * mib), 10);
    r.sge_count = 4;
    r.sg[1] = {.va = function::va(2 * mib + 100), .key = rcvkey, .length = 0};
    r.sg[2] = {.va = function::va(2 * mib + 200), .key = rcvkey, .length = 555};
    r.sg[3] = {.va = function::va(2 * mib + 4000), .key = rcvkey, .length = 1000};
    REQUIRE(p.b.post_receive(r));
    REQUIRE(p.a.post_send(s));
    const auto done = p.sends_of_a(1);
    CHECK(done[0].byte_len == 1001);
    std::vector<std::byte> sent, got;
    for (const auto& g : {std::pair{100ul, 300ul}, {5000ul, 1ul}, {9000ul, 700ul}}) {
        sent.insert(sent.end(), p.fa.host + g.first, p.fa.host + g.first + g.second);
    }
    for (const auto& g : {std::pair{0ul, 10ul}, {200ul, 555ul}, {4000ul, 436ul}}) {
        got.insert(got.end(), p.fb.host + 2 * mib + g.first, p.fb.host + 2 * mib + g.first + g.second);
    }
    CHECK(got == sent);
    const auto rc = take_all(p.b, sr::completion_side::receive);
    REQUIRE(rc.size() == 1);
    CHECK(rc[0].byte_len == 1001);
}

// Timers among many queue pairs (engine.hpp: a queue ordered by due time, not a sweep of the
// table): 256 more queue pairs on each side, numbered below a's and b's, and a's timers still
// act in the first poll at their deadline, not in a later one. The times handed to poll are
// made up, so the test does not depend on how fast the host runs.
TEST_CASE("among 257 queue pairs, a lost ACK's timer and an RNR wait each act in the first poll at their deadline") {
    pair p({.timeout = 8, .min_rnr_timer = 4});   // 1.05 ms; RNR 40 us
    for (std::uint32_t qpn = 1; qpn <= 0x100; ++qpn) {
        p.fa.make_qp(qpn, 16);
        p.fb.make_qp(qpn, 16);
    }
    const auto ack = sr::ack_timeout(8);
    const auto rnr = sr::rnr_timer(4);

    SECTION("the ack timer") {
        REQUIRE(p.b.post_receive(receive(1, rcvkey, function::va(2 * mib), 4096)));
        REQUIRE(p.a.post_send(request(sr::work_op::send, 1, lkey, function::va(0), 1000)));
        const auto t0 = clock::now();
        p.fa.eng->poll(t0);              // sends; the timer runs until t0 + ack
        pair::lose(p.fa, true);
        p.fb.eng->poll(t0);              // executes the SEND; its ACK is lost
        p.fa.eng->poll(t0 + 1us);        // (the loss happens here)
        pair::lose(p.fa, false);
        p.fa.eng->poll(t0 + ack - 1us);
        CHECK(p.a.counters().timeouts == 0);
        p.fa.eng->poll(t0 + ack);
        CHECK(p.a.counters().timeouts == 1);
        CHECK(p.a.counters().retransmitted == 1);
    }
    SECTION("the RNR wait") {
        REQUIRE(p.a.post_send(request(sr::work_op::send, 1, lkey, function::va(0), 1000)));
        const auto t0 = clock::now();
        p.fa.eng->poll(t0);              // sends
        p.fb.eng->poll(t0);              // no receive: RNR NAK
        p.fa.eng->poll(t0 + 1us);        // the NAK: wait until t0 + 1 us + rnr
        REQUIRE(p.a.counters().rnr_naks_received == 1);
        REQUIRE(p.b.post_receive(receive(1, rcvkey, function::va(2 * mib), 4096)));
        p.fa.eng->poll(t0 + rnr);
        CHECK(p.a.counters().retransmitted == 0);
        p.fa.eng->poll(t0 + 1us + rnr);
        CHECK(p.a.counters().retransmitted == 1);
        const auto done = p.sends_of_a(1);
        CHECK(done[0].status == sr::completion_status::success);
    }
}
