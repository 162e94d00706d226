// sim/roce RC queue pairs moving data: SEND/RECV, RDMA WRITE (also inline), RDMA READ, from
// 1 byte to 1 MiB, between two functions over the switch and on one queue pair looped to
// itself; PSN wrap across 2^24; RNR retried without end until a receive is posted.
#include "test/model/roce_engine/fabric.hpp"

using namespace rig::test::roce;
namespace sr = rig::sim::roce;

namespace {

const std::vector<std::uint32_t> sizes = {1, 3, 4, 255, 1023, 1024, 1025, 4096, 65536, 65537, 1000000, 1 << 20};

// Runs one message of each size a -> b and checks the bytes and the completions.
void transfer_all_sizes(function& fa, sr::rc_qp& a, function& fb, sr::rc_qp& b, sr::work_op op) {
    std::uint32_t index = 0;
    for (std::uint32_t n : sizes) {
        INFO("bytes " << n << ", " << sr::to_string(op));
        const std::uint64_t seed = n * 7 + static_cast<std::uint64_t>(op);
        if (op == sr::work_op::read) {
            fill_random(fb.at(dst, n), seed);
            std::memset(fa.at(src, n).data(), 0, n);
        } else {
            fill_random(fa.at(src, n), seed);
            std::memset(fb.at(op == sr::work_op::send ? rcv : dst, n).data(), 0, n);
        }
        if (op == sr::work_op::send) {
            REQUIRE(b.post_receive(receive(900 + index, rcvkey, function::va(rcv), static_cast<std::uint32_t>(mib))));
        }
        REQUIRE(a.post_send(request(op, index, lkey, function::va(src), n, rkey, function::va(dst))));
        std::vector<sr::completion> done;
        REQUIRE(run_until({&fa, &fb}, [&] {
            sr::completion c;
            while (a.take(sr::completion_side::send, c)) {
                done.push_back(c);
            }
            return !done.empty();
        }));
        REQUIRE(done.size() == 1);
        CHECK(done[0].index == index);
        CHECK(done[0].status == sr::completion_status::success);
        CHECK(done[0].byte_len == n);
        CHECK(done[0].op == op);
        if (op == sr::work_op::send) {
            std::vector<sr::completion> r;
            REQUIRE(run_until({&fa, &fb}, [&] {
                r = take_all(b, sr::completion_side::receive);
                return !r.empty();
            }));
            REQUIRE(r.size() == 1);
            CHECK(r[0].index == 900 + index);
            CHECK(r[0].status == sr::completion_status::success);
            CHECK(r[0].byte_len == n);
            CHECK(checksum(fb.at(rcv, n)) == checksum(fa.at(src, n)));
        } else if (op == sr::work_op::write) {
            CHECK(checksum(fb.at(dst, n)) == checksum(fa.at(src, n)));
        } else {
            CHECK(checksum(fa.at(src, n)) == checksum(fb.at(dst, n)));
        }
        ++index;
    }
    CHECK(a.state() == sr::qp_state::rts);
    CHECK(b.state() == sr::qp_state::rts);
}

}  // namespace

TEST_CASE("SEND lands in the posted receive, 1 B to 1 MiB, between two functions") {
    two_functions t;
    auto &fa = t.fa, &fb = t.fb;
    auto &a = t.a, &b = t.b;
    connect(a, fa, b, fb);
    transfer_all_sizes(fa, a, fb, b, sr::work_op::send);
    CHECK(a.counters().retransmitted == 0);
}

TEST_CASE("RDMA WRITE and RDMA READ move 1 B to 1 MiB between two functions") {
    two_functions t;
    auto &fa = t.fa, &fb = t.fb;
    auto &a = t.a, &b = t.b;
    connect(a, fa, b, fb, {.mtu = 4096});
    transfer_all_sizes(fa, a, fb, b, sr::work_op::write);
    transfer_all_sizes(fa, a, fb, b, sr::work_op::read);
}

TEST_CASE("one queue pair connected to itself runs SEND, WRITE and READ") {
    sr::wire w;
    function f(w, 1, 3 * mib);
    auto& q = planned(f).make_qp(0x77);
    connect(q, f, q, f, {.mtu = 256, .a_psn = 42, .b_psn = 42});
    for (auto op : {sr::work_op::send, sr::work_op::write, sr::work_op::read}) {
        transfer_all_sizes(f, q, f, q, op);
    }
}

TEST_CASE("inline RDMA WRITE and SEND carry their bytes in the request") {
    two_functions t;
    auto &fa = t.fa, &fb = t.fb;
    auto &a = t.a, &b = t.b;
    connect(a, fa, b, fb, {.mtu = 256});
    sr::send_request r;
    r.op = sr::work_op::write;
    r.index = 5;
    r.is_inline = true;
    r.inline_bytes = sr::max_inline;   // one MTU of 256: a WRITE ONLY
    fill_random(std::span<std::byte>(r.inline_data), 9);
    r.rkey = rkey;
    r.remote_va = function::va(dst + 100);
    REQUIRE(a.post_send(r));
    sr::send_request s = r;
    s.op = sr::work_op::send;
    s.index = 6;
    s.inline_bytes = 28;
    REQUIRE(b.post_receive(receive(1, rcvkey, function::va(rcv), 64)));
    REQUIRE(a.post_send(s));
    std::vector<sr::completion> done;
    REQUIRE(run_until({&fa, &fb}, [&] {
        auto more = take_all(a, sr::completion_side::send);
        done.insert(done.end(), more.begin(), more.end());
        return done.size() == 2;
    }));
    CHECK(done[0].index == 5);
    CHECK(done[0].byte_len == sr::max_inline);
    CHECK(done[1].index == 6);
    CHECK(std::memcmp(fb.host + dst + 100, r.inline_data.data(), sr::max_inline) == 0);
    CHECK(std::memcmp(fb.host + rcv, r.inline_data.data(), 28) == 0);
    const auto got = take_all(b, sr::completion_side::receive);
    REQUIRE(got.size() == 1);
    CHECK(got[0].byte_len == 28);
}

TEST_CASE("PSNs wrap from 2^24 - 1 to 0 in the middle of messages") {
    two_functions t;
    auto &fa = t.fa, &fb = t.fb;
    auto &a = t.a, &b = t.b;
    connect(a, fa, b, fb, {.mtu = 1024, .a_psn = 0xfffff0, .b_psn = 0xfffffd});
    // a: 4 sends of 10 packets cross the wrap; b: reads of 8 packets cross it on b's side
    for (std::uint32_t i = 0; i < 4; ++i) {
        fill_random(fa.at(src + i * 10240, 10240), i);
        REQUIRE(b.post_receive(receive(i, rcvkey, function::va(rcv + i * 10240), 10240)));
        REQUIRE(a.post_send(request(sr::work_op::send, i, lkey, function::va(src + i * 10240), 10240)));
    }
    fill_random(fa.at(dst, 8192), 99);
    REQUIRE(b.post_send(request(sr::work_op::read, 50, lkey, function::va(src + 0x80000), 8192, rkey, function::va(dst))));
    REQUIRE(b.post_send(request(sr::work_op::read, 51, lkey, function::va(src + 0x90000), 8192, rkey, function::va(dst))));
    std::vector<sr::completion> sa, sb;
    REQUIRE(run_until({&fa, &fb}, [&] {
        auto x = take_all(a, sr::completion_side::send);
        auto y = take_all(b, sr::completion_side::send);
        sa.insert(sa.end(), x.begin(), x.end());
        sb.insert(sb.end(), y.begin(), y.end());
        return sa.size() == 4 && sb.size() == 2;
    }));
    for (std::uint32_t i = 0; i < 4; ++i) {
        CHECK(sa[i].index == i);
        CHECK(sa[i].status == sr::completion_status::success);
        CHECK(checksum(fb.at(rcv + i * 10240, 10240)) == checksum(fa.at(src + i * 10240, 10240)));
    }
    CHECK(sb[0].status == sr::completion_status::success);
    CHECK(sb[1].status == sr::completion_status::success);
    CHECK(checksum(fb.at(src + 0x80000, 8192)) == checksum(fa.at(dst, 8192)));
    CHECK(checksum(fb.at(src + 0x90000, 8192)) == checksum(fa.at(dst, 8192)));
    CHECK(a.counters().retransmitted == 0);
}

TEST_CASE("a SEND with no receive posted is RNR-NAKed and retried without end, then lands once a receive is posted") {
    two_functions t;
    auto &fa = t.fa, &fb = t.fb;
    auto &a = t.a, &b = t.b;
    connect(a, fa, b, fb, {.rnr_retry = 7, .min_rnr_timer = 1});
    fill_random(fa.at(src, 5000), 5);
    REQUIRE(a.post_send(request(sr::work_op::send, 1, lkey, function::va(src), 5000)));
    // far more RNR NAKs than any retry count of 7: still no completion
    REQUIRE(run_until({&fa, &fb}, [&] { return a.counters().rnr_naks_received >= 50; }));
    sr::completion c;
    CHECK_FALSE(a.take(sr::completion_side::send, c));
    CHECK(a.state() == sr::qp_state::rts);
    CHECK(b.counters().rnr_naks_sent >= 50);
    REQUIRE(b.post_receive(receive(3, rcvkey, function::va(rcv), 8192)));
    REQUIRE(run_until({&fa, &fb}, [&] { return a.take(sr::completion_side::send, c); }));
    CHECK(c.status == sr::completion_status::success);
    const auto r = take_all(b, sr::completion_side::receive);
    REQUIRE(r.size() == 1);
    CHECK(r[0].byte_len == 5000);
    CHECK(checksum(fb.at(rcv, 5000)) == checksum(fa.at(src, 5000)));
}

TEST_CASE("with rnr_retry below 7, RNR NAKs are retried that many times, then RNR_RETRY_EXCEEDED") {
    two_functions t;
    auto &fa = t.fa, &fb = t.fb;
    auto &a = t.a, &b = t.b;
    connect(a, fa, b, fb, {.rnr_retry = 3});
    REQUIRE(a.post_send(request(sr::work_op::send, 1, lkey, function::va(src), 10)));
    REQUIRE(a.post_send(request(sr::work_op::send, 2, lkey, function::va(src), 10)));
    std::vector<sr::completion> done;
    REQUIRE(run_until({&fa, &fb}, [&] {
        auto x = take_all(a, sr::completion_side::send);
        done.insert(done.end(), x.begin(), x.end());
        return done.size() == 2;
    }));
    CHECK(done[0].status == sr::completion_status::rnr_retry_exceeded);
    CHECK(done[1].status == sr::completion_status::flushed);
    CHECK(a.counters().rnr_naks_received == 4);   // the first send and 3 retries
    CHECK(a.state() == sr::qp_state::error);
    CHECK(b.state() == sr::qp_state::rts);   // RNR is no error of the responder
}

TEST_CASE("zero-byte SEND, WRITE and READ take one packet each and complete with zero bytes") {
    two_functions t;
    auto &fa = t.fa, &fb = t.fb;
    auto &a = t.a, &b = t.b;
    connect(a, fa, b, fb);
    REQUIRE(b.post_receive(receive(9, rcvkey, function::va(rcv), 16)));
    std::uint32_t i = 0;
    for (auto op : {sr::work_op::send, sr::work_op::write, sr::work_op::read}) {
        sr::send_request r = request(op, i++, lkey, function::va(src), 0, rkey, function::va(dst));
        r.sge_count = 0;
        REQUIRE(a.post_send(r));
    }
    std::vector<sr::completion> done;
    REQUIRE(run_until({&fa, &fb}, [&] {
        auto x = take_all(a, sr::completion_side::send);
        done.insert(done.end(), x.begin(), x.end());
        return done.size() == 3;
    }));
    for (std::uint32_t k = 0; k < 3; ++k) {
        CHECK(done[k].index == k);
        CHECK(done[k].status == sr::completion_status::success);
        CHECK(done[k].byte_len == 0);
    }
    const auto r = take_all(b, sr::completion_side::receive);
    REQUIRE(r.size() == 1);
    CHECK(r[0].byte_len == 0);
    CHECK(a.counters().packets_sent == 3);
}

TEST_CASE("a receive keeps its queue pair's rq_max_sge scatter entries: a SEND spreads over both of two, a receive "
          "of three fails it with a local QP operation error, and 0 or 17 a receive is refused") {
    sr::wire w;
    function fa{w, 1, 3 * mib};
    function fb{w, 2, 3 * mib};
    sr::rc_qp& a = planned(fa).make_qp(0x101);
    sr::rc_qp& b = planned(fb).make_qp(0x202, 256, 2);
    connect(a, fa, b, fb);
    fill_random(fa.at(src, 5000), 9);
    std::memset(fb.at(rcv, 16384).data(), 0, 16384);

    sr::receive_request two = receive(1, rcvkey, function::va(rcv), 3000);
    two.sge_count = 2;
    two.sg[1] = {.va = function::va(rcv + 8192), .key = rcvkey, .length = 3000};
    REQUIRE(b.post_receive(two));
    REQUIRE(a.post_send(request(sr::work_op::send, 1, lkey, function::va(src), 5000)));
    sr::completion c;
    REQUIRE(run_until({&fa, &fb}, [&] { return a.take(sr::completion_side::send, c); }));
    CHECK(c.status == sr::completion_status::success);
    auto r = take_all(b, sr::completion_side::receive);
    REQUIRE(r.size() == 1);
    CHECK(r[0].index == 1);
    CHECK(r[0].status == sr::completion_status::success);
    CHECK(r[0].byte_len == 5000);
    CHECK(checksum(fb.at(rcv, 3000)) == checksum(fa.at(src, 3000)));              // the first entry, whole
    CHECK(checksum(fb.at(rcv + 8192, 2000)) == checksum(fa.at(src + 3000, 2000)));  // the rest in the second
    CHECK(fb.at(rcv + 8192 + 2000, 1)[0] == std::byte{0});                       // and no further

    sr::receive_request three = two;
    three.index = 2;
    three.sge_count = 3;
    three.sg[2] = {.va = function::va(rcv + 12288), .key = rcvkey, .length = 3000};
    REQUIRE(b.post_receive(three));
    REQUIRE(a.post_send(request(sr::work_op::send, 2, lkey, function::va(src), 10)));
    REQUIRE(run_until({&fa, &fb}, [&] { return a.take(sr::completion_side::send, c); }));
    CHECK(c.status == sr::completion_status::remote_operation);
    r = take_all(b, sr::completion_side::receive);
    REQUIRE(r.size() == 1);
    CHECK(r[0].index == 2);
    CHECK(r[0].status == sr::completion_status::local_qp_operation);

    for (const std::uint8_t bad : {std::uint8_t{0}, static_cast<std::uint8_t>(sr::max_sge + 1)}) {
        INFO("rq_max_sge " << int{bad});
        CHECK_THROWS_AS(fb.make_qp(0x303, 256, bad), std::invalid_argument);
    }
}

// The send shadow keeps scatter lists and inline bytes out of line (qp_config::sq_payload_bytes):
// 512 bytes asked for are 32 units of 16 and 16 more for an entry that goes back to the start.
TEST_CASE("a send's scatter list and inline bytes wait in its queue pair's payload store: one that reaches the "
          "store's end, one that goes back to its start, and one that does not fit is not taken until earlier "
          "ones complete, every byte delivered") {
    sr::wire w;
    function fa{w, 1, 3 * mib};
    function fb{w, 2, 3 * mib};
    sr::rc_qp& a = planned(fa).make_qp(0x101, 8, sr::max_sge, 512);
    sr::rc_qp& b = planned(fb).make_qp(0x202);
    connect(a, fa, b, fb);
    fill_random(fa.at(src, 8192), 21);
    std::memset(fb.at(dst, 8192).data(), 0, 8192);
    std::memset(fb.at(rcv, 512).data(), 0, 512);
    auto inline_request = [](sr::work_op op, std::uint32_t index, std::uint64_t seed) {
        sr::send_request r;
        r.op = op;
        r.index = index;
        r.is_inline = true;
        r.inline_bytes = sr::max_inline;   // 16 units
        fill_random(std::span<std::byte>(r.inline_data), seed);
        r.rkey = rkey;
        r.remote_va = function::va(dst);
        return r;
    };
    const sr::send_request x = inline_request(sr::work_op::write, 1, 1);   // units 0..15
    const sr::send_request y = inline_request(sr::work_op::send, 2, 2);    // 16..31: waits for a receive (RNR)
    REQUIRE(a.post_send(x));
    REQUIRE(a.post_send(y));
    sr::completion c;
    REQUIRE(run_until({&fa, &fb}, [&] { return a.take(sr::completion_side::send, c); }));
    CHECK(c.index == 1);
    CHECK(std::memcmp(fb.host + dst, x.inline_data.data(), sr::max_inline) == 0);

    sr::send_request z = request(sr::work_op::write, 3, lkey, 0, 0, rkey, function::va(dst + 1024));
    z.sge_count = sr::max_sge;   // 32..47: up to the store's very end
    for (std::uint32_t i = 0; i < sr::max_sge; ++i) {
        z.sg[i] = {.va = function::va(src + 4096 - 200 * i), .key = lkey, .length = 100};
    }
    const sr::send_request v = request(sr::work_op::write, 4, lkey, function::va(src + 5000), 777, rkey,
                                       function::va(dst + 4096));   // 0, where x was: x has completed
    REQUIRE(a.post_send(z));
    REQUIRE(a.post_send(v));
    // y, z and v hold 33 units and one more inline entry does not fit: not taken, nothing changed
    const std::uint32_t room = a.send_room();
    const sr::send_request u = inline_request(sr::work_op::write, 5, 5);
    CHECK_FALSE(a.post_send(u));
    CHECK(a.send_room() == room);

    REQUIRE(b.post_receive(receive(9, rcvkey, function::va(rcv), 512)));
    std::vector<sr::completion> done;
    REQUIRE(run_until({&fa, &fb}, [&] {
        auto more = take_all(a, sr::completion_side::send);
        done.insert(done.end(), more.begin(), more.end());
        return done.size() == 3;
    }));
    for (std::size_t i = 0; i < done.size(); ++i) {
        CHECK(done[i].index == 2 + i);
        CHECK(done[i].status == sr::completion_status::success);
    }
    CHECK(std::memcmp(fb.host + rcv, y.inline_data.data(), sr::max_inline) == 0);
    for (std::uint32_t i = 0; i < sr::max_sge; ++i) {
        INFO("scatter entry " << i);
        CHECK(checksum(fb.at(dst + 1024 + 100 * i, 100)) == checksum(fa.at(src + 4096 - 200 * i, 100)));
    }
    CHECK(checksum(fb.at(dst + 4096, 777)) == checksum(fa.at(src + 5000, 777)));
    REQUIRE(a.post_send(u));   // now the store is empty
    REQUIRE(run_until({&fa, &fb}, [&] { return a.take(sr::completion_side::send, c); }));
    CHECK(c.index == 5);
    CHECK(c.status == sr::completion_status::success);
    CHECK(std::memcmp(fb.host + dst, u.inline_data.data(), sr::max_inline) == 0);
}
