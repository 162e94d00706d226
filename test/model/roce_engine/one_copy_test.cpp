// sim/roce one copy per byte: frames carry their payload by reference into the sender's DMA
// window and the receiver copies it from there (sim/roce/wire.hpp). The bytes that arrive are
// right for WRITE, SEND and READ of one and of many packets with nothing materialized; a
// capture or a duplicating or delaying fault materializes frames and the bytes stay right; a
// DMA_UNMAP of the sender's window while frames pointing into it wait at a receiver that is
// held off materializes them first, so they deliver the bytes there at unmap time.
#include <cstring>
#include <mutex>
#include <vector>

#include "sim/roce/model_core.hpp"
#include "test/model/roce_engine/fabric.hpp"
#include "test/temp_dir.hpp"
#include "test/within.hpp"

using namespace rig::test::roce;
namespace sr = rig::sim::roce;

namespace {

// One message a -> b (WRITE, SEND) or b -> a (READ) of `n` bytes; checks completion and bytes.
void one_message(two_functions& t, sr::work_op op, std::uint32_t n, std::uint32_t index) {
    INFO(sr::to_string(op) << " of " << n << " bytes");
    const std::uint64_t seed = n * 3 + index;
    // what moves: a's source for WRITE and SEND, b's target range for READ
    std::span<std::byte> from = op == sr::work_op::read ? t.fb.at(dst, n) : t.fa.at(src, n);
    std::span<std::byte> to = op == sr::work_op::read ? t.fa.at(src, n) : t.fb.at(op == sr::work_op::send ? rcv : dst, n);
    fill_random(from, seed);
    std::memset(to.data(), 0, n);
    if (op == sr::work_op::send) {
        REQUIRE(t.b.post_receive(receive(index, rcvkey, function::va(rcv), static_cast<std::uint32_t>(mib))));
    }
    REQUIRE(t.a.post_send(request(op, index, lkey, function::va(src), n, rkey, function::va(dst))));
    sr::completion c;
    REQUIRE(run_until({&t.fa, &t.fb}, [&] { return t.a.take(sr::completion_side::send, c); }));
    CHECK(c.status == sr::completion_status::success);
    CHECK(c.index == index);
    CHECK(std::memcmp(from.data(), to.data(), n) == 0);
    if (op == sr::work_op::send) {
        REQUIRE(t.b.take(sr::completion_side::receive, c));
        CHECK(c.status == sr::completion_status::success);
        CHECK(c.byte_len == n);
    }
}

// A station that polls one fabric function's engine on the model core, as a NIC model's data
// path does (its DMA space and region table pinned for the pass), unless held off. The test
// posts and takes under `lock`, as a NIC model's commands take the function's lock.
struct polled final : sr::station {
    function& f;
    std::mutex lock;
    std::atomic<bool> held{false};
    explicit polled(function& fn) : f(fn) {}
    bool step(std::chrono::steady_clock::time_point) noexcept override {
        std::lock_guard g(lock);
        if (held.load()) {
            return false;
        }
        // the region table, then the DMA view (sim/roce/memory.hpp "Lock order")
        sr::memory::pin pinned(f.mem);
        return f.eng->poll(clock::now());
    }
};

// joined to a core for a scope, so that a failed REQUIRE never leaves a station behind
struct joined {
    sr::model_core& core;
    sr::station& s;
    joined(sr::model_core& c, sr::station& st) : core(c), s(st) { core.join(s); }
    ~joined() { core.leave(s); }
    joined(const joined&) = delete;
    joined& operator=(const joined&) = delete;
};

template <class Pred>
bool eventually(Pred p, std::chrono::milliseconds limit = 10000ms) {
    return rig::test::within(limit, p);
}

}  // namespace

TEST_CASE("frames between guarded functions carry their payload by reference and deliver WRITE, SEND and READ bytes of one and many packets") {
    two_functions t;
    connect(t.a, t.fa, t.b, t.fb, {.mtu = 1024});
    std::uint32_t index = 0;
    std::uint64_t packets = 0;
    for (const sr::work_op op : {sr::work_op::write, sr::work_op::send, sr::work_op::read}) {
        for (const std::uint32_t n : {1u, 1024u, 5 * 1024u + 17, 65536u}) {
            one_message(t, op, n, index++);
            packets += sr::packets_of(n, 1024);
        }
    }
    const auto c = t.w.counters();
    CHECK(c.materialized == 0);
    CHECK(c.by_reference == packets);   // every data packet and READ response, none of the ACKs or requests
    CHECK(c.dropped == 0);
}

TEST_CASE("a payload that cannot be referenced (inline, several scatter entries) is copied into the frame and arrives whole") {
    two_functions t;
    connect(t.a, t.fa, t.b, t.fb, {.mtu = 1024});
    fill_random(t.fa.at(src, 3000), 5);
    // 3000 bytes from two scatter entries (1000 + 2000): the packets' pieces that span the
    // boundary are gathered; the others still go by reference
    sr::send_request r = request(sr::work_op::write, 1, lkey, function::va(src), 1000, rkey, function::va(dst));
    r.sge_count = 2;
    r.sg[1] = {.va = function::va(src + 1000), .key = lkey, .length = 2000};
    REQUIRE(t.a.post_send(r));
    sr::send_request in;
    in.index = 2;
    in.op = sr::work_op::write;
    in.is_inline = true;
    in.inline_bytes = 100;
    std::memcpy(in.inline_data.data(), t.fa.at(src, 100).data(), 100);
    in.rkey = rkey;
    in.remote_va = function::va(dst + 4096);
    REQUIRE(t.a.post_send(in));
    std::vector<sr::completion> done;
    REQUIRE(run_until({&t.fa, &t.fb}, [&] {
        sr::completion c;
        while (t.a.take(sr::completion_side::send, c)) {
            done.push_back(c);
        }
        return done.size() == 2;
    }));
    CHECK(done[0].status == sr::completion_status::success);
    CHECK(done[1].status == sr::completion_status::success);
    CHECK(std::memcmp(t.fa.at(src, 3000).data(), t.fb.at(dst, 3000).data(), 3000) == 0);
    CHECK(std::memcmp(t.fa.at(src, 100).data(), t.fb.at(dst + 4096, 100).data(), 100) == 0);
    const auto c = t.w.counters();
    // packets of 1024: [0,1024) spans both entries (gathered), [1024,2048) and [2048,3000)
    // lie in the second (by reference); the inline one is in the request
    CHECK(c.by_reference == 2);
    CHECK(c.materialized == 0);
}

TEST_CASE("a capture or a duplicating or delaying fault materializes frames by reference, and the bytes still arrive right") {
    rig::test::temp_dir dir("rig-one-copy");
    SECTION("capture") {
        two_functions t;
        REQUIRE(t.w.capture(dir.file("one-copy.pcap")));
        connect(t.a, t.fa, t.b, t.fb, {.mtu = 1024});
        one_message(t, sr::work_op::write, 8 * 1024, 1);
        one_message(t, sr::work_op::read, 3 * 1024 + 5, 2);
        t.w.capture("");
        const auto c = t.w.counters();
        CHECK(c.by_reference == 12);
        CHECK(c.materialized == c.by_reference);   // every one, before the capture sealed it
    }
    SECTION("duplicates and delay") {
        two_functions t;
        t.w.set_faults({.duplicate = 0.5, .delay = 20us});
        connect(t.a, t.fa, t.b, t.fb, {.mtu = 1024});
        for (std::uint32_t i = 0; i < 4; ++i) {
            one_message(t, sr::work_op::write, 16 * 1024, 10 + i);
            one_message(t, sr::work_op::send, 4 * 1024 + 1, 20 + i);
            one_message(t, sr::work_op::read, 8 * 1024, 30 + i);
        }
        const auto c = t.w.counters();
        CHECK(c.duplicated > 0);
        CHECK(c.by_reference >= 4 * (16 + 5 + 8));
        CHECK(c.materialized == c.by_reference);
    }
}

TEST_CASE("unmapping the sender's window while frames pointing into it wait at a held-off receiver delivers the bytes there at unmap time") {
    two_functions t;
    auto& [w, fa, fb, a, b] = t;
    // an ack timeout of 4 s: no retransmission while b is held off
    connect(a, fa, b, fb, {.mtu = 1024, .timeout = 20});
    constexpr std::uint32_t n = 8 * 1024;
    fill_random(fa.at(src, n), 11);
    const std::vector<std::byte> at_unmap(fa.at(src, n).begin(), fa.at(src, n).end());
    std::memset(fb.at(dst, n).data(), 0, n);

    polled pa(fa), pb(fb);
    pb.held = true;
    sr::model_core& core = w.core();
    joined ja(core, pa), jb(core, pb);
    {
        std::lock_guard g(pa.lock);
        REQUIRE(a.post_send(request(sr::work_op::write, 1, lkey, function::va(src), n, rkey, function::va(dst))));
    }
    // the eight packets wait in b's queue, each pointing into a's window
    REQUIRE(eventually([&] { return fb.port->queued() == 8; }));
    CHECK(w.counters().by_reference == 8);
    CHECK(w.counters().materialized == 0);

    // the client unmaps a's window (its VFIO_USER_DMA_UNMAP): the wire is told first
    REQUIRE(fa.dma.unmap(iova_base, fa.bytes) == 0);
    CHECK(w.counters().materialized == 8);
    // a's memory changes after the unmap (the client's own mapping of it stays): what arrives
    // is what was there when the window went
    std::memset(fa.at(src, n).data(), 0xee, n);

    pb.held = false;
    sr::completion c{};
    bool completed = false;
    REQUIRE(eventually([&] {
        std::lock_guard g(pa.lock);
        completed = a.take(sr::completion_side::send, c);
        return completed;
    }));
    CHECK(c.status == sr::completion_status::success);
    CHECK(std::memcmp(fb.at(dst, n).data(), at_unmap.data(), n) == 0);
    CHECK(w.counters().dropped == 0);
}

TEST_CASE("on the model core a WRITE's packets land as one copy, in arrival order with another queue pair's WRITE to the same bytes") {
    two_functions t;
    auto& [w, fa, fb, a1, b1] = t;
    auto& a2 = fa.make_qp(0x103);
    auto& b2 = fb.make_qp(0x204);
    connect(a1, fa, b1, fb, {.mtu = 1024, .timeout = 20});   // no retransmission while b is held off
    connect(a2, fa, b2, fb, {.mtu = 1024, .timeout = 20});
    constexpr std::uint32_t n = 16 * 1024;
    fill_random(fa.at(src, n), 21);            // a1 writes these to b's dst
    fill_random(fa.at(src + n, n), 22);        // then a2 writes these over them
    std::memset(fb.at(dst, n).data(), 0, n);

    polled pa(fa), pb(fb);
    pb.held = true;   // both messages wait at b, a1's packets first: b takes them in one pass
    sr::model_core& core = w.core();
    joined ja(core, pa), jb(core, pb);
    {
        std::lock_guard g(pa.lock);
        REQUIRE(a1.post_send(request(sr::work_op::write, 1, lkey, function::va(src), n, rkey, function::va(dst))));
        REQUIRE(a2.post_send(request(sr::work_op::write, 2, lkey, function::va(src + n), n, rkey, function::va(dst))));
    }
    REQUIRE(eventually([&] { return fb.port->queued() == 32; }));
    pb.held = false;
    int completed = 0;
    REQUIRE(eventually([&] {
        std::lock_guard g(pa.lock);
        sr::completion c;
        for (sr::rc_qp* q : {&a1, &a2}) {
            while (q->take(sr::completion_side::send, c)) {
                CHECK(c.status == sr::completion_status::success);
                ++completed;
            }
        }
        return completed == 2;
    }));
    // the later message's bytes, as a card that writes in arrival order leaves them
    CHECK(std::memcmp(fb.at(dst, n).data(), fa.at(src + n, n).data(), n) == 0);
    CHECK(w.counters().by_reference == 32);
    CHECK(w.counters().materialized == 0);
}
