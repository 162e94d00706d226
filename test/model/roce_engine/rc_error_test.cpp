// sim/roce RC queue pairs failing as the IB spec says: retry exceeded when the peer's link is
// down, remote access errors (bad key, out of bounds, missing right), a receive too small, and
// the flush of everything pending after a failure, in order.
#include "test/model/roce_engine/fabric.hpp"

using namespace rig::test::roce;
namespace sr = rig::sim::roce;

namespace {

constexpr std::uint32_t readonly = 0x44;   // beside fabric.hpp's plan: the top half of dst

struct pair {
    sr::wire w;
    function fa{w, 1, 3 * mib}, fb{w, 2, 3 * mib};
    sr::rc_qp& a = fa.make_qp(0x101);
    sr::rc_qp& b = fb.make_qp(0x202);
    explicit pair(const link_options& o = {}) {
        for (function* f : {&fa, &fb}) {
            f->reg(lkey, src, mib, sr::access_local_write);
            f->reg(rkey, dst, mib / 2, sr::access_local_write | sr::access_remote_read | sr::access_remote_write);
            f->reg(readonly, dst + mib / 2, mib / 2, sr::access_remote_read);
            f->reg(rcvkey, rcv, mib, sr::access_local_write);
            fill_random(f->at(0, 3 * mib), f == &fa ? 1 : 2);
        }
        connect(a, fa, b, fb, o);
    }
    // Runs until a has `n` send completions.
    std::vector<sr::completion> sends_of_a(std::size_t n, std::chrono::nanoseconds limit = 10s) {
        std::vector<sr::completion> done;
        const bool ok = run_until({&fa, &fb}, [&] {
            auto x = take_all(a, sr::completion_side::send);
            done.insert(done.end(), x.begin(), x.end());
            return done.size() >= n;
        }, limit);
        REQUIRE(ok);
        return done;
    }
};

void check_flushed(const std::vector<sr::completion>& c, std::size_t from, std::uint32_t first_index) {
    for (std::size_t i = from; i < c.size(); ++i) {
        CHECK(c[i].status == sr::completion_status::flushed);
        CHECK(c[i].index == first_index + (i - from));
    }
}

}  // namespace

TEST_CASE("a send the peer does not acknowledge fails RETRY_EXCEEDED after retry_count retransmissions of 67 ms (timeout 14)") {
    pair p({.timeout = 14, .retry_count = 7});
    p.fb.port->set_link(false);
    REQUIRE(p.a.post_send(request(sr::work_op::write, 1, lkey, function::va(src), 3000, rkey, function::va(dst))));
    const auto t0 = clock::now();
    const auto done = p.sends_of_a(1, 2s);
    const auto took = clock::now() - t0;
    // the first transmission and 7 retransmissions each wait one ack timeout of 4.096 us x 2^14
    const auto timeout = sr::ack_timeout(14);
    CHECK(timeout == std::chrono::nanoseconds(67'108'864));
    CHECK(done[0].status == sr::completion_status::retry_exceeded);
    CHECK(took >= 8 * timeout);
    CHECK(took < 8 * timeout + 150ms);
    CHECK(p.a.counters().timeouts == 8);
    CHECK(p.a.counters().retransmitted == 7 * 3);   // 3 packets of 1024 each time
    CHECK(p.a.state() == sr::qp_state::error);
}

TEST_CASE("retransmission after the ack timeout recovers when the link comes back before retries run out") {
    pair p({.timeout = 8, .retry_count = 7});   // 1 ms
    p.fb.port->set_link(false);
    REQUIRE(p.a.post_send(request(sr::work_op::write, 1, lkey, function::va(src), 5000, rkey, function::va(dst))));
    REQUIRE(run_until({&p.fa, &p.fb}, [&] { return p.a.counters().timeouts >= 3; }));
    p.fb.port->set_link(true);
    const auto done = p.sends_of_a(1);
    CHECK(done[0].status == sr::completion_status::success);
    CHECK(checksum(p.fb.at(dst, 5000)) == checksum(p.fa.at(src, 5000)));
}

TEST_CASE("a READ whose responses are lost is asked again, and fails RETRY_EXCEEDED when the peer stays away") {
    pair p({.timeout = 6, .retry_count = 2});
    p.fb.port->set_link(false);
    REQUIRE(p.a.post_send(request(sr::work_op::read, 4, lkey, function::va(src), 9000, rkey, function::va(dst))));
    const auto done = p.sends_of_a(1);
    CHECK(done[0].status == sr::completion_status::retry_exceeded);
    CHECK(p.a.counters().timeouts == 3);
}

TEST_CASE("a WRITE under a bad rkey, out of bounds or without remote write fails remote access on both sides, target untouched") {
    struct kase {
        const char* name;
        std::uint32_t key;
        std::uint64_t offset;
        std::uint32_t bytes;
    };
    for (const kase k : {kase{"bad key", 0x999, dst, 100}, kase{"out of bounds", rkey, dst + mib / 2 - 50, 100},
                         kase{"no remote write", readonly, dst + mib / 2, 100},
                         kase{"second packet out of bounds", rkey, dst + mib / 2 - 2000, 4000}}) {
        INFO(k.name);
        pair p;
        const auto before = checksum(p.fb.at(0, 3 * mib));
        REQUIRE(p.b.post_receive(receive(70, rcvkey, function::va(rcv), 100)));
        REQUIRE(p.a.post_send(request(sr::work_op::write, 1, lkey, function::va(src), 64, rkey, function::va(dst))));
        REQUIRE(p.a.post_send(request(sr::work_op::write, 2, lkey, function::va(src), k.bytes, k.key, function::va(k.offset))));
        REQUIRE(p.a.post_send(request(sr::work_op::send, 3, lkey, function::va(src), 10)));
        const auto done = p.sends_of_a(3);
        CHECK(done[0].status == sr::completion_status::success);
        CHECK(done[1].index == 2);
        CHECK(done[1].status == sr::completion_status::remote_access);
        check_flushed(done, 2, 3);
        CHECK(p.a.state() == sr::qp_state::error);
        REQUIRE(run_until({&p.fa, &p.fb}, [&] { return p.b.state() == sr::qp_state::error; }));
        // the responder's receive flushes; its memory holds the first WRITE only
        const auto r = take_all(p.b, sr::completion_side::receive);
        REQUIRE(r.size() == 1);
        CHECK(r[0].status == sr::completion_status::flushed);
        CHECK(std::memcmp(p.fb.host + dst, p.fa.host + src, 64) == 0);
        std::vector<std::byte> expect(p.fb.host, p.fb.host + 3 * mib);
        fill_random(expect, 2);
        std::memcpy(expect.data() + dst, p.fa.host + src, 64);
        CHECK(checksum(p.fb.at(0, 3 * mib)) == checksum(expect));
        CHECK(before != checksum(expect));
    }
}

TEST_CASE("a READ under a bad rkey or without remote read fails remote access, local buffer untouched") {
    for (const std::uint32_t key : {0x999u, lkey}) {
        pair p;
        const auto before = checksum(p.fa.at(0, 3 * mib));
        REQUIRE(p.a.post_send(request(sr::work_op::read, 8, lkey, function::va(src), 3000, key, function::va(dst))));
        const auto done = p.sends_of_a(1);
        CHECK(done[0].status == sr::completion_status::remote_access);
        CHECK(checksum(p.fa.at(0, 3 * mib)) == before);
        REQUIRE(run_until({&p.fa, &p.fb}, [&] { return p.b.state() == sr::qp_state::error; }));
    }
}

TEST_CASE("a send longer than its receive fails both: local length at the responder, remote invalid request at the requester") {
    pair p;
    REQUIRE(p.b.post_receive(receive(10, rcvkey, function::va(rcv), 2000)));
    REQUIRE(p.b.post_receive(receive(11, rcvkey, function::va(rcv + 4096), 8000)));
    REQUIRE(p.a.post_send(request(sr::work_op::send, 1, lkey, function::va(src), 3000)));
    REQUIRE(p.a.post_send(request(sr::work_op::send, 2, lkey, function::va(src), 10)));
    const auto done = p.sends_of_a(2);
    CHECK(done[0].status == sr::completion_status::remote_invalid_request);
    CHECK(done[1].status == sr::completion_status::flushed);
    REQUIRE(run_until({&p.fa, &p.fb}, [&] { return p.b.state() == sr::qp_state::error; }));
    const auto r = take_all(p.b, sr::completion_side::receive);
    REQUIRE(r.size() == 2);
    CHECK(r[0].index == 10);
    CHECK(r[0].status == sr::completion_status::local_length);
    CHECK(r[1].index == 11);
    CHECK(r[1].status == sr::completion_status::flushed);
    CHECK(p.a.state() == sr::qp_state::error);
}

TEST_CASE("after a failure every pending entry of both rings completes flushed, in order, and so do later posts") {
    pair p;
    // a: receives pending on its own ring too
    for (std::uint32_t i = 0; i < 3; ++i) {
        REQUIRE(p.a.post_receive(receive(200 + i, rcvkey, function::va(rcv), 100)));
    }
    REQUIRE(p.b.post_receive(receive(300, rcvkey, function::va(rcv), 4096)));
    REQUIRE(p.a.post_send(request(sr::work_op::send, 0, lkey, function::va(src), 4096)));
    REQUIRE(p.a.post_send(request(sr::work_op::write, 1, lkey, function::va(src), 10, rkey, function::va(dst))));
    sr::send_request unsignaled = request(sr::work_op::write, 2, lkey, function::va(src), 10, rkey, function::va(dst));
    unsignaled.signaled = false;
    REQUIRE(p.a.post_send(unsignaled));
    REQUIRE(p.a.post_send(request(sr::work_op::read, 3, lkey, function::va(src), 10, 0x999, function::va(dst))));
    for (std::uint32_t i = 4; i < 10; ++i) {
        REQUIRE(p.a.post_send(request(sr::work_op::write, i, lkey, function::va(src), 5000, rkey, function::va(dst))));
    }
    const auto done = p.sends_of_a(9);
    // 0, 1 succeed; 2 is unsignaled and silent; 3 fails; 4..9 flush
    REQUIRE(done.size() == 9);
    CHECK(done[0].index == 0);
    CHECK(done[0].status == sr::completion_status::success);
    CHECK(done[1].index == 1);
    CHECK(done[1].status == sr::completion_status::success);
    CHECK(done[2].index == 3);
    CHECK(done[2].status == sr::completion_status::remote_access);
    check_flushed(done, 3, 4);
    const auto r = take_all(p.a, sr::completion_side::receive);
    REQUIRE(r.size() == 3);
    check_flushed(r, 0, 200);
    // later posts flush too, in order, on both rings
    REQUIRE(p.a.post_send(request(sr::work_op::send, 20, lkey, function::va(src), 10)));
    REQUIRE(p.a.post_receive(receive(21, rcvkey, function::va(rcv), 10)));
    const auto later = take_all(p.a, sr::completion_side::send);
    REQUIRE(later.size() == 1);
    CHECK(later[0].index == 20);
    CHECK(later[0].status == sr::completion_status::flushed);
    const auto later_r = take_all(p.a, sr::completion_side::receive);
    REQUIRE(later_r.size() == 1);
    CHECK(later_r[0].status == sr::completion_status::flushed);
    // a failed queue pair stays failed until reset; then it connects again from RESET
    p.a.transmit(clock::now());
    CHECK(p.a.state() == sr::qp_state::error);
    p.a.reset();
    CHECK(p.a.state() == sr::qp_state::reset);
    CHECK_FALSE(p.a.post_send(request(sr::work_op::send, 0, lkey, function::va(src), 10)));
    CHECK_THROWS_AS(p.a.to_rts({}), std::invalid_argument);
}

TEST_CASE("a local key refused at the start of an entry fails it with local protection after the entries before it") {
    pair p;
    REQUIRE(p.a.post_send(request(sr::work_op::write, 1, lkey, function::va(src), 3000, rkey, function::va(dst))));
    REQUIRE(p.a.post_send(request(sr::work_op::write, 2, 0x999, function::va(src), 10, rkey, function::va(dst))));
    sr::send_request bad_inline = request(sr::work_op::read, 3, lkey, function::va(src), 10, rkey, function::va(dst));
    bad_inline.is_inline = true;
    REQUIRE(p.a.post_send(bad_inline));
    const auto done = p.sends_of_a(3);
    CHECK(done[0].status == sr::completion_status::success);
    CHECK(done[1].status == sr::completion_status::local_protection);
    CHECK(done[2].status == sr::completion_status::flushed);
    CHECK(checksum(p.fb.at(dst, 3000)) == checksum(p.fa.at(src, 3000)));

    pair q;
    REQUIRE(q.a.post_send(bad_inline));
    const auto d2 = q.sends_of_a(1);
    CHECK(d2[0].status == sr::completion_status::local_qp_operation);
}

TEST_CASE("a queue pair without remote write or remote read enabled answers those requests with invalid request") {
    for (const auto op : {sr::work_op::write, sr::work_op::read}) {
        sr::wire w;
        function fa(w, 1, 3 * mib), fb(w, 2, 3 * mib);
        for (function* f : {&fa, &fb}) {
            f->reg(lkey, src, mib, sr::access_local_write);
            f->reg(rkey, dst, mib, sr::access_local_write | sr::access_remote_read | sr::access_remote_write);
        }
        auto& a = fa.make_qp(1);
        auto& b = fb.make_qp(2);
        connect(a, fa, b, fb);
        b.reset();   // again, taking only the other operation
        b.to_init(op == sr::work_op::write ? sr::access_remote_read : sr::access_remote_write);
        sr::path path;
        path.dest_qpn = a.qpn();
        path.dest_mac = fa.port->mac();
        path.dest_gid = fa.gid;
        path.rq_psn = link_options{}.a_psn;
        b.to_rtr(path);
        const auto before = checksum(fb.at(dst, 100));
        REQUIRE(a.post_send(request(op, 1, lkey, function::va(src), 100, rkey, function::va(dst))));
        std::vector<sr::completion> done;
        REQUIRE(run_until({&fa, &fb}, [&] {
            done = take_all(a, sr::completion_side::send);
            return !done.empty();
        }));
        CHECK(done[0].status == sr::completion_status::remote_invalid_request);
        CHECK(b.state() == sr::qp_state::error);
        CHECK(checksum(fb.at(dst, 100)) == before);
    }
}

// Found by test/fuzz/roce (roce-frame, corpus crash-dup-read-no-right): a READ request whose PSN
// lies just before the expected one was answered as a duplicate by a queue pair that takes no
// READ at all, handing out the region's bytes.
namespace {

// One queue pair in RTS (expected PSN 100) whose peer is another host behind an uplink: the test
// writes the peer's requests as frames and reads what the queue pair answers.
struct lone_qp {
    sr::wire w;
    function f{w, 1, 3 * mib};
    sr::rc_qp& q;
    std::unique_ptr<sr::port> outside;
    rig::roce::route route;

    explicit lone_qp(std::uint8_t remote_rights) : q((planned(f), f.make_qp(0x101))), outside(w.attach_uplink()) {
        const sr::mac_address peer_mac{std::byte{2}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0x99}};
        rig::roce::gid peer_gid = f.gid;
        peer_gid[15] = std::byte{0x99};
        q.to_init(remote_rights);
        sr::path path;
        path.dest_qpn = 0x202;
        path.dest_mac = peer_mac;
        path.dest_gid = peer_gid;
        path.rq_psn = 100;
        q.to_rtr(path);
        q.to_rts({});
        route.src_mac = peer_mac;
        route.dst_mac = f.port->mac();
        route.src_gid = peer_gid;
        route.dst_gid = f.gid;
    }
    // What the queue pair sends back for `request`: the opcodes and AETH syndromes.
    std::vector<std::pair<rig::roce::opcode, std::uint8_t>> answers_to(const rig::roce::transport& request) {
        sr::frame* fr = outside->allocate();
        REQUIRE(fr != nullptr);
        fr->size = static_cast<std::uint32_t>(rig::roce::encode(route, request, {}, fr->bytes));
        const auto now = clock::now();
        outside->transmit(fr, now);
        f.eng->poll(now);
        std::vector<std::pair<rig::roce::opcode, std::uint8_t>> out;
        while (sr::frame* back = outside->receive(now)) {
            outside->materialize(back);
            const auto d = rig::roce::decode(back->data(), rig::roce::icrc_check::skip);
            REQUIRE(d.has_value());
            out.emplace_back(d->bth.op, d->bth.syndrome);
            outside->release(back);
        }
        return out;
    }
    rig::roce::transport request(rig::roce::opcode op, std::uint32_t psn, std::uint32_t dma_length) const {
        rig::roce::transport t;
        t.op = op;
        t.dest_qp = q.qpn();
        t.va = function::va(dst);
        t.rkey = rkey;
        t.dma_length = dma_length;
        t.psn = psn;
        return t;
    }
};

const auto invalid_request_nak =
    rig::roce::syndrome(rig::roce::ack_kind::nak, static_cast<std::uint8_t>(rig::roce::nak_code::invalid_request));

}  // namespace

TEST_CASE("a queue pair without remote read answers no READ request sent as a duplicate and NAKs one at the expected PSN") {
    lone_qp l(sr::access_remote_write);
    // before the expected PSN: a duplicate, but of no READ executed
    CHECK(l.answers_to(l.request(rig::roce::opcode::read_request, 99, 64)).empty());
    CHECK(l.q.counters().duplicates_received == 1);
    CHECK(l.q.state() == sr::qp_state::rts);
    const auto nak = l.answers_to(l.request(rig::roce::opcode::read_request, 100, 64));
    REQUIRE(nak.size() == 1);
    CHECK(nak[0].first == rig::roce::opcode::acknowledge);
    CHECK(nak[0].second == invalid_request_nak);
    CHECK(l.q.state() == sr::qp_state::error);
}

// Found by test/fuzz/roce (roce-frame, corpus crash-dma-length-over-2g): a READ asking for more
// than 2^31 bytes was taken as far as its R_Key check, its response PSNs spanning more than half
// the PSN space. IBA C9-94 (rxe_resp.c rxe_resp_check_length): NAK invalid request, before the key.
TEST_CASE("a READ or WRITE whose DMA length is over 2^31 is NAKed invalid request, its R_Key unchecked") {
    for (const auto op : {rig::roce::opcode::read_request, rig::roce::opcode::write_only}) {
        lone_qp l(sr::access_remote_write | sr::access_remote_read);
        const auto nak = l.answers_to(l.request(op, 100, (1u << 31) + 1));
        REQUIRE(nak.size() == 1);
        CHECK(nak[0].first == rig::roce::opcode::acknowledge);
        CHECK(nak[0].second == invalid_request_nak);
        CHECK(l.q.state() == sr::qp_state::error);
    }
}

// Found by test/fuzz/roce (roce-frame, corpus crash-zero-length-rkey): zero-length RDMA
// operations were NAKed remote access error for an R_Key no region has.
TEST_CASE("a zero-length WRITE or READ needs no valid R_Key or VA (IB spec C9-88) and completes with success") {
    for (const auto op : {sr::work_op::write, sr::work_op::read}) {
        pair p;
        const auto before = checksum(p.fb.at(0, 3 * mib));
        REQUIRE(p.a.post_send(request(op, 1, lkey, function::va(src), 0, 0x999, 0)));
        const auto done = p.sends_of_a(1);
        CHECK(done[0].status == sr::completion_status::success);
        CHECK(done[0].byte_len == 0);
        CHECK(p.b.state() == sr::qp_state::rts);
        CHECK(checksum(p.fb.at(0, 3 * mib)) == before);
    }
}
