// The Boost.Asio adapter (rig/asio.hpp, issue 18) on two model functions of the family under test
// on one wire, each NIC with a completion group and an adapter on one io_context: WRITE,
// SEND/RECEIVE and READ with each token kind (a callback, use_future, use_awaitable, yield_context),
// the bytes and the completions' fields checked; handlers never run inside the initiating call;
// failures, destroy and close complete every pending handler with its code; an idle io_context
// thread with receives pending sleeps; misuse throws and posts nothing.
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>   // first: Boost 1.74's awaitable.hpp uses std::exchange without including it
#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <catch2/catch.hpp>

#include "rig/asio.hpp"
#include "rig/group.hpp"
#include "rig/nic.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"
#include "test/model/qp_api/served_nics.hpp"

namespace {

using namespace std::chrono_literals;
using boost::system::error_code;
using rig::completion;
using rig::operation;
using rig::side;
using rig::asio::errc;
using rig::test::ok;
using rig::test::value;

// Each NIC with a group and an adapter on one io_context, a queue pair of each connected to the
// other. Declared so that the adapters go before the io_context, and both before the NICs.
struct asio_pair {
    rig::test::two_served_functions t;
    rig::completion_group g1, g2;
    boost::asio::io_context io;
    rig::asio::group a1, a2;
    rig::queue_pair q1, q2;

    explicit asio_pair(const rig::nic_options& o = {}, rig::asio::options ao = {})
        : t(1 << 20, rig::access::remote, o),
          g1(value(t.n1->make_group({.entries = 1024, .log_ring_entries = 6}))),
          g2(value(t.n2->make_group({.entries = 1024, .log_ring_entries = 6}))),
          a1(value(rig::asio::group::make(io.get_executor(), g1, ao))),
          a2(value(rig::asio::group::make(io.get_executor(), g2, ao))),
          q1(value(a1.make_qp(*t.n1))),
          q2(value(a2.make_qp(*t.n2))) {
        ok(q1.connect(q2.local()));
        ok(q2.connect(q1.local()));
    }

    // Runs the io_context until `done` holds, at most `bound`; whether it held.
    bool run_until(const std::function<bool()>& done, std::chrono::milliseconds bound = 5s) {
        const auto end = std::chrono::steady_clock::now() + bound;
        while (!done() && std::chrono::steady_clock::now() < end) {
            io.restart();
            io.run_for(5ms);
        }
        return done();
    }
};

double thread_cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// The offsets of one exchange: q1 WRITEs 64 pattern bytes to r2 at 4096, SENDs 100 bytes from
// r1 at 256 into q2's receive at r2 8192, READs r2's 4096.. back into r1 at 12288.
constexpr std::size_t write_at = 4096, send_from = 256, receive_at = 8192, read_into = 12288;

void fill(asio_pair& p, std::uint64_t seed) {
    rig::test::fill_pattern(p.t.r1.data(), 64, seed);
    rig::test::fill_pattern(p.t.r1.data() + send_from, 100, seed + 1);
}

void check_ok(const error_code& ec, const completion& c, const rig::queue_pair& q, side ring, operation op,
              std::uint32_t bytes) {
    INFO(ec.message() << (c.failure ? ": " + c.failure->message : std::string()));
    CHECK_FALSE(ec);
    CHECK(c.ok());
    CHECK(c.qp == q.number());
    CHECK(c.ring == ring);
    CHECK(c.op == op);
    CHECK(c.bytes == bytes);
}

// Every byte of the exchange landed where it was sent.
void check_bytes(asio_pair& p, std::uint64_t seed) {
    CHECK(rig::test::pattern_mismatch(p.t.r2.data() + write_at, 64, seed) == 64);
    CHECK(rig::test::pattern_mismatch(p.t.r2.data() + receive_at, 100, seed + 1) == 100);
    CHECK(rig::test::pattern_mismatch(p.t.r1.data() + read_into, 64, seed) == 64);
}

// An allocator that counts what it gives out, for a handler that names it (allocator_type and
// get_allocator(): what boost::asio::associated_allocator looks for).
template <class T>
struct counting_allocator {
    using value_type = T;
    int* count;
    explicit counting_allocator(int* c) noexcept : count(c) {}
    template <class U>
    counting_allocator(const counting_allocator<U>& o) noexcept : count(o.count) {}
    T* allocate(std::size_t n) {
        ++*count;
        return std::allocator<T>().allocate(n);
    }
    void deallocate(T* p, std::size_t n) noexcept { std::allocator<T>().deallocate(p, n); }
    template <class U>
    bool operator==(const counting_allocator<U>& o) const noexcept { return count == o.count; }
};

struct allocating_handler {
    using allocator_type = counting_allocator<void>;
    int* count;
    bool* ran;
    allocator_type get_allocator() const noexcept { return allocator_type(count); }
    void operator()(error_code ec, completion) const {
        CHECK_FALSE(ec);
        *ran = true;
    }
};

}  // namespace

TEST_CASE("asio: a callback token: WRITE, SEND into a pending RECEIVE, READ", "[model][asio]") {
    asio_pair p;
    fill(p, 11);
    int done = 0;
    p.a2.async_receive(p.q2, p.t.r2, receive_at, 4096, [&](error_code ec, completion c) {
        check_ok(ec, c, p.q2, side::receive, operation::receive, 100);
        ++done;
    });
    p.a1.async_write(p.q1, p.t.r1, 0, 64, p.t.r2.remote(write_at), [&](error_code ec, completion c) {
        check_ok(ec, c, p.q1, side::send, operation::write, 64);
        p.a1.async_send(p.q1, p.t.r1, send_from, 100, [&](error_code ec2, completion c2) {
            check_ok(ec2, c2, p.q1, side::send, operation::send, 100);
            p.a1.async_read(p.q1, p.t.r2.remote(write_at), p.t.r1, read_into, 64, [&](error_code ec3, completion c3) {
                check_ok(ec3, c3, p.q1, side::send, operation::read, 64);
                ++done;
            });
        });
    });
    REQUIRE(p.run_until([&] { return done == 2; }));
    check_bytes(p, 11);
    CHECK(p.a1.pending() == 0);
    CHECK(p.a2.pending() == 0);
}

TEST_CASE("asio: use_future: WRITE, SEND/RECEIVE, READ", "[model][asio]") {
    asio_pair p;
    fill(p, 12);
    // The futures' handlers run on use_future's own executor (Asio's system executor): the
    // io_context runs the adapters' waits until each future is ready.
    const auto ready = [&](std::future<completion>& f) {
        return p.run_until([&] { return f.wait_for(0s) == std::future_status::ready; });
    };
    std::future<completion> receive = p.a2.async_receive(p.q2, p.t.r2, receive_at, 4096, boost::asio::use_future);
    std::future<completion> write = p.a1.async_write(p.q1, p.t.r1, 0, 64, p.t.r2.remote(write_at),
                                                     boost::asio::use_future);
    REQUIRE(ready(write));
    check_ok({}, write.get(), p.q1, side::send, operation::write, 64);
    std::future<completion> send = p.a1.async_send(p.q1, p.t.r1, send_from, 100, boost::asio::use_future);
    REQUIRE(ready(send));
    check_ok({}, send.get(), p.q1, side::send, operation::send, 100);
    REQUIRE(ready(receive));
    check_ok({}, receive.get(), p.q2, side::receive, operation::receive, 100);
    std::future<completion> read = p.a1.async_read(p.q1, p.t.r2.remote(write_at), p.t.r1, read_into, 64,
                                                   boost::asio::use_future);
    REQUIRE(ready(read));
    check_ok({}, read.get(), p.q1, side::send, operation::read, 64);
    check_bytes(p, 12);
}

TEST_CASE("asio: use_awaitable in a coroutine (co_spawn): WRITE, SEND/RECEIVE, READ", "[model][asio]") {
    asio_pair p;
    fill(p, 13);
    bool finished = false;
    std::exception_ptr failed;
    boost::asio::co_spawn(
        p.io,
        [&]() -> boost::asio::awaitable<void> {
            using boost::asio::use_awaitable;
            // Posted at the call; awaited after the SEND: its completion may come first and
            // waits for the handler.
            auto receive = p.a2.async_receive(p.q2, p.t.r2, receive_at, 4096, use_awaitable);
            completion w = co_await p.a1.async_write(p.q1, p.t.r1, 0, 64, p.t.r2.remote(write_at), use_awaitable);
            check_ok({}, w, p.q1, side::send, operation::write, 64);
            completion s = co_await p.a1.async_send(p.q1, p.t.r1, send_from, 100, use_awaitable);
            check_ok({}, s, p.q1, side::send, operation::send, 100);
            completion r = co_await std::move(receive);
            check_ok({}, r, p.q2, side::receive, operation::receive, 100);
            completion rd =
                co_await p.a1.async_read(p.q1, p.t.r2.remote(write_at), p.t.r1, read_into, 64, use_awaitable);
            check_ok({}, rd, p.q1, side::send, operation::read, 64);
            finished = true;
        },
        [&](std::exception_ptr e) { failed = e; });
    REQUIRE(p.run_until([&] { return finished || failed; }));
    REQUIRE_FALSE(failed);
    check_bytes(p, 13);
}

TEST_CASE("asio: yield_context (spawn): WRITE, SEND/RECEIVE, READ", "[model][asio]") {
    asio_pair p;
    fill(p, 14);
    bool received = false, finished = false;
    boost::asio::spawn(p.io, [&](boost::asio::yield_context yield) {
        error_code ec;
        completion r = p.a2.async_receive(p.q2, p.t.r2, receive_at, 4096, yield[ec]);
        check_ok(ec, r, p.q2, side::receive, operation::receive, 100);
        received = true;
    });
    boost::asio::spawn(p.io, [&](boost::asio::yield_context yield) {
        error_code ec;
        completion w = p.a1.async_write(p.q1, p.t.r1, 0, 64, p.t.r2.remote(write_at), yield[ec]);
        check_ok(ec, w, p.q1, side::send, operation::write, 64);
        completion s = p.a1.async_send(p.q1, p.t.r1, send_from, 100, yield[ec]);
        check_ok(ec, s, p.q1, side::send, operation::send, 100);
        completion rd = p.a1.async_read(p.q1, p.t.r2.remote(write_at), p.t.r1, read_into, 64, yield[ec]);
        check_ok(ec, rd, p.q1, side::send, operation::read, 64);
        finished = true;
    });
    REQUIRE(p.run_until([&] { return received && finished; }));
    check_bytes(p, 14);
}

TEST_CASE("asio: WRITE and SEND with immediate: the peer's receive completes with the value", "[model][asio]") {
    asio_pair p;
    fill(p, 15);
    std::vector<completion> got;
    const auto keep = [&](error_code ec, completion c) {
        INFO(ec.message() << (c.failure ? ": " + c.failure->message : std::string()));
        CHECK_FALSE(ec);
        got.push_back(std::move(c));
    };
    p.a2.async_receive(p.q2, p.t.r2, receive_at, 4096, keep);
    p.a2.async_receive(p.q2, p.t.r2, receive_at + 4096, 4096, keep);
    p.a1.async_write_imm(p.q1, p.t.r1, 0, 64, p.t.r2.remote(write_at), 0xfeedf00du, keep);
    p.a1.async_send_imm(p.q1, p.t.r1, send_from, 100, 0x12345678u, keep);
    REQUIRE(p.run_until([&] { return got.size() == 4; }));
    std::vector<const completion*> receives;
    for (const completion& c : got) {
        if (c.ring == side::receive) {
            receives.push_back(&c);
        }
    }
    REQUIRE(receives.size() == 2);
    CHECK(receives[0]->op == operation::write_imm);   // a receive's ring completes in entry order
    CHECK(receives[0]->immediate == 0xfeedf00du);
    CHECK(receives[1]->op == operation::receive);
    CHECK(receives[1]->immediate == 0x12345678u);
    CHECK(receives[1]->bytes == 100);
    CHECK(rig::test::pattern_mismatch(p.t.r2.data() + write_at, 64, 15) == 64);
    CHECK(rig::test::pattern_mismatch(p.t.r2.data() + receive_at + 4096, 100, 16) == 100);
}

TEST_CASE("asio: a handler never runs inside the initiating call, nor inside close or destroy; it runs on "
          "the io_context's thread", "[model][asio]") {
    asio_pair p;
    bool returned = false, ran = false;
    p.a1.async_write(p.q1, p.t.r1, 0, 64, p.t.r2.remote(0), [&](error_code ec, completion) {
        CHECK_FALSE(ec);
        CHECK(returned);
        CHECK(p.io.get_executor().running_in_this_thread());
        ran = true;
    });
    returned = true;
    REQUIRE(p.run_until([&] { return ran; }));
    // A completion already in the CQ when the next post is made: still not run inside it.
    bool second_returned = false, second_ran = false;
    const std::uint64_t cqes = p.t.m1.cqes_written();
    p.a1.async_write(p.q1, p.t.r1, 0, 64, p.t.r2.remote(0), [&](error_code, completion) {
        CHECK(second_returned);
        second_ran = true;
    });
    rig::test::await_cqes(p.t.m1, cqes + 1);   // the WRITE done in the NIC, its CQE written
    bool third_returned = false, third_ran = false;
    p.a1.async_write(p.q1, p.t.r1, 0, 64, p.t.r2.remote(0), [&](error_code, completion) {
        CHECK(third_returned);
        third_ran = true;
    });
    second_returned = third_returned = true;
    REQUIRE(p.run_until([&] { return second_ran && third_ran; }));
    // close completes the pending receive after it returned
    bool close_returned = false, aborted = false;
    p.a2.async_receive(p.q2, p.t.r2, 0, 64, [&](error_code ec, completion c) {
        CHECK(close_returned);
        CHECK(ec == errc::aborted);
        CHECK_FALSE(c.ok());
        aborted = true;
    });
    p.a2.close();
    close_returned = true;
    CHECK_FALSE(aborted);
    REQUIRE(p.run_until([&] { return aborted; }));
}

TEST_CASE("asio: a failed WRITE completes its handler with the entry's error, the later ones flushed; "
          "every handler runs once", "[model][asio]") {
    asio_pair p;
    int posted = 0, ran = 0;
    std::optional<error_code> receive_code, good_code, bad_code, after_code;
    std::optional<completion> bad;
    const auto into = [&](std::optional<error_code>& where, std::optional<completion>* keep = nullptr) {
        ++posted;
        return [&where, keep, &ran](error_code ec, completion c) {
            where = ec;
            if (keep != nullptr) {
                *keep = std::move(c);
            }
            ++ran;
        };
    };
    p.a1.async_receive(p.q1, p.t.r1, 0, 64, into(receive_code));
    p.a1.async_write(p.q1, p.t.r1, 0, 64, p.t.r2.remote(0), into(good_code));
    const rig::remote no_such_key{p.t.r2.remote(0).address, p.t.r2.remote(0).key ^ 0x5a5a00};
    p.a1.async_write(p.q1, p.t.r1, 0, 64, no_such_key, into(bad_code, &bad));
    p.a1.async_write(p.q1, p.t.r1, 0, 64, p.t.r2.remote(64), into(after_code));
    REQUIRE(p.run_until([&] { return ran == posted; }));
    CHECK(*good_code == error_code());
    CHECK(*bad_code == errc::entry);
    CHECK(bad_code->category() == rig::asio::category());
    CHECK(std::string(bad_code->category().name()) == "rig");
    REQUIRE(bad.has_value());
    REQUIRE(bad->failure.has_value());
    CHECK(bad->failure->kind == rig::error_kind::entry);
    CHECK_FALSE(bad->failure->flushed);
    CHECK(bad->failure->syndrome == rig::test::expected(rig::test::failure_kind::remote_access).syndrome);
    CHECK(*after_code == errc::flushed);
    CHECK(*receive_code == errc::flushed);
    CHECK(p.a1.pending() == 0);
    // Nothing hangs: with nothing pending the io_context runs out of work at once.
    p.io.restart();
    const auto t0 = std::chrono::steady_clock::now();
    p.io.run_for(2s);
    CHECK(std::chrono::steady_clock::now() - t0 < 1s);
    CHECK(ran == posted);
}

TEST_CASE("asio: destroy completes the queue pair's pending receives with aborted; close completes the rest",
          "[model][asio]") {
    asio_pair p;
    rig::queue_pair other = value(p.a2.make_qp(*p.t.n2));
    int aborted = 0, ran = 0;
    const auto count = [&](error_code ec, completion c) {
        aborted += ec == errc::aborted ? 1 : 0;
        CHECK_FALSE(c.ok());
        ++ran;
    };
    for (std::size_t k = 0; k < 3; ++k) {
        p.a2.async_receive(p.q2, p.t.r2, 64 * k, 64, count);
    }
    CHECK_THROWS_AS(p.a2.async_receive(other, p.t.r2, 4096, 64, count), std::invalid_argument);   // not connected
    CHECK(p.a2.pending() == 3);
    rig::queue_pair peer = value(p.t.n1->make_qp());
    ok(other.connect(peer.local()));
    ok(peer.connect(other.local()));
    for (std::size_t k = 0; k < 2; ++k) {
        p.a2.async_receive(other, p.t.r2, 4096 + 64 * k, 64, count);
    }
    CHECK(p.a2.pending() == 5);
    p.io.restart();
    p.io.run_for(50ms);   // nothing arrives
    CHECK(ran == 0);
    ok(p.a2.destroy(p.q2));
    CHECK(p.q2.destroyed());
    CHECK(p.a2.pending() == 2);
    REQUIRE(p.run_until([&] { return ran == 3; }));
    CHECK(aborted == 3);
    CHECK_THROWS_AS(p.a2.async_receive(p.q2, p.t.r2, 0, 64, count), std::invalid_argument);   // destroyed
    p.a2.close();
    CHECK(p.a2.closed());
    CHECK(p.a2.pending() == 0);
    REQUIRE(p.run_until([&] { return ran == 5; }));
    CHECK(aborted == 5);
    CHECK_THROWS_WITH(p.a2.async_receive(other, p.t.r2, 0, 64, count), Catch::Contains("closed"));
    CHECK(other.room(side::receive) == (1u << 6) - 2 - (rig::test::family_under_test() == rig::test::family::bnxt));
}

TEST_CASE("asio: an idle io_context thread with receives pending sleeps on the eventfd", "[model][asio]") {
    asio_pair p;
    int ran = 0;
    for (std::size_t k = 0; k < 4; ++k) {
        p.a2.async_receive(p.q2, p.t.r2, 64 * k, 64, [&](error_code ec, completion c) {
            check_ok(ec, c, p.q2, side::receive, operation::receive, 8);
            ++ran;
        });
    }
    double spent = -1;
    std::chrono::steady_clock::duration wall{};
    std::thread runner([&] {
        const double cpu = thread_cpu_seconds();
        const auto t0 = std::chrono::steady_clock::now();
        p.io.run_for(1s);
        wall = std::chrono::steady_clock::now() - t0;
        spent = thread_cpu_seconds() - cpu;
    });
    runner.join();
    INFO("CPU of the io_context thread over an idle second: " << spent * 1e3 << " ms");
    CHECK(wall >= 1s);   // the pending receives kept it waiting
    CHECK(spent >= 0);
    CHECK(spent < 0.05);
    CHECK(ran == 0);
    CHECK(p.a2.pending() == 4);
    // and it wakes for the messages
    int sent = 0;
    for (std::size_t k = 0; k < 4; ++k) {
        p.a1.async_send(p.q1, p.t.r1, 0, 8, [&](error_code ec, completion) {
            CHECK_FALSE(ec);
            ++sent;
        });
    }
    REQUIRE(p.run_until([&] { return ran == 4 && sent == 4; }));
}

TEST_CASE("asio: misuse throws std::invalid_argument and posts nothing", "[model][asio]") {
    asio_pair p;
    int ran = 0;
    const auto count = [&](error_code, completion) { ++ran; };
    // a queue pair of no group, one of the group made without the adapter, one of the other adapter
    rig::queue_pair plain = value(p.t.n1->make_qp());
    rig::queue_pair direct = value(p.t.n1->make_qp(p.g1));
    ok(plain.connect(p.q2.local()));
    ok(direct.connect(p.q2.local()));
    CHECK_THROWS_WITH(p.a1.async_write(plain, p.t.r1, 0, 64, p.t.r2.remote(0), count),
                      Catch::Contains("not one this asio::group made"));
    CHECK_THROWS_AS(p.a1.async_write(direct, p.t.r1, 0, 64, p.t.r2.remote(0), count), std::invalid_argument);
    CHECK_THROWS_AS(p.a1.async_receive(p.q2, p.t.r2, 0, 64, count), std::invalid_argument);
    CHECK_THROWS_AS(p.a1.destroy(plain), std::invalid_argument);
    CHECK(plain.room(side::send) == (1u << 12) - (rig::test::family_under_test() == rig::test::family::bnxt));
    // the post's own misuse: bytes outside the region; the slot is given back
    const std::uint32_t room = p.q1.room(side::send);
    CHECK_THROWS_AS(p.a1.async_write(p.q1, p.t.r1, (1 << 20) - 8, 64, p.t.r2.remote(0), count), std::invalid_argument);
    CHECK_THROWS_AS(p.a1.async_send(p.q1, p.t.r2, 0, 64, count), std::invalid_argument);   // another NIC's region
    CHECK(p.q1.room(side::send) == room);
    CHECK(p.a1.pending() == 0);
    p.io.restart();
    p.io.run_for(20ms);
    CHECK(ran == 0);
    // an empty adapter, and a group destroyed
    rig::asio::group empty;
    CHECK_THROWS_WITH(empty.async_write(p.q1, p.t.r1, 0, 64, p.t.r2.remote(0), count), Catch::Contains("empty"));
    rig::completion_group gone = value(p.t.n1->make_group({.entries = 64, .log_ring_entries = 4}));
    ok(gone.destroy());
    CHECK_THROWS_AS(rig::asio::group::make(p.io.get_executor(), gone), std::invalid_argument);
    // and the adapter still works
    p.a1.async_write(p.q1, p.t.r1, 0, 64, p.t.r2.remote(0), count);
    REQUIRE(p.run_until([&] { return ran == 1; }));
}

TEST_CASE("asio: the NIC's failure completes the pending handlers with errors", "[model][asio]") {
    rig::nic_options o;
    o.health_interval = 50ms;
    // A cap on the wait of a command the dead function would not answer (the health look finds
    // it first; close sends none). It bounds the pair's setup commands too, the connects
    // included: 2 s, not 500 ms (74ec1c7: a setup command outlasted 300 ms on a loaded 2-CPU CI
    // host).
    o.command_timeout = 2s;
    asio_pair p(o);
    int ran = 0;
    std::vector<error_code> codes;
    std::vector<std::string> messages;
    for (std::size_t k = 0; k < 3; ++k) {
        p.a1.async_receive(p.q1, p.t.r1, 64 * k, 64, [&](error_code ec, completion c) {
            codes.push_back(ec);
            REQUIRE_FALSE(c.ok());
            messages.push_back(c.failure->message);
            ++ran;
        });
    }
    p.t.m1.die();
    REQUIRE(p.run_until([&] { return ran == 3; }, 10s));
    for (std::size_t k = 0; k < codes.size(); ++k) {
        const error_code& ec = codes[k];
        INFO(ec.message() << ": " << messages[k]);
        CHECK(messages[k].find("NIC failed") != std::string::npos);
        CHECK(ec == errc::flushed);   // the NIC's failure fails its queue pairs: their entries flush
    }
}

TEST_CASE("asio: the NIC closed under the adapter: its pending handlers complete with aborted at the next look",
          "[model][asio]") {
    rig::asio::options o;
    o.look_interval = 20ms;
    asio_pair p({}, o);
    int aborted = 0;
    for (std::size_t k = 0; k < 2; ++k) {
        p.a1.async_receive(p.q1, p.t.r1, 64 * k, 64, [&](error_code ec, completion) {
            aborted += ec == errc::aborted ? 1 : 0;
        });
    }
    p.io.restart();
    p.io.run_for(10ms);
    ok(p.t.n1->close());   // destroys the group and its queue pairs; no event says so
    CHECK(p.g1.destroyed());
    REQUIRE(p.run_until([&] { return aborted == 2; }, 2s));
    CHECK(p.a1.pending() == 0);
    CHECK_THROWS_AS(p.a1.async_receive(p.q1, p.t.r1, 0, 64, [](error_code, completion) {}), std::invalid_argument);
}

TEST_CASE("asio: a handler's associated executor and allocator are used", "[model][asio]") {
    asio_pair p;
    // bound to another io_context: it runs there, and that io_context has work until it does
    boost::asio::io_context other;
    bool ran_there = false;
    p.a1.async_write(p.q1, p.t.r1, 0, 64, p.t.r2.remote(0),
                     boost::asio::bind_executor(other, [&](error_code ec, completion c) {
                         CHECK_FALSE(ec);
                         CHECK(c.bytes == 64);
                         CHECK(other.get_executor().running_in_this_thread());
                         CHECK_FALSE(p.io.get_executor().running_in_this_thread());
                         ran_there = true;
                     }));
    REQUIRE(p.run_until([&] { return p.a1.pending() == 0; }));
    CHECK_FALSE(ran_there);
    CHECK(other.run_for(2s) == 1);   // returns once the handler ran: its work was counted
    CHECK(ran_there);
    // a handler naming its allocator: the pending operation's memory comes from it (the post's
    // would too through an executor that takes Asio's allocator property: any_io_executor does not)
    int allocations = 0;
    bool ran = false;
    p.a1.async_write(p.q1, p.t.r1, 0, 64, p.t.r2.remote(0), allocating_handler{&allocations, &ran});
    CHECK(allocations == 1);
    REQUIRE(p.run_until([&] { return ran; }));
    CHECK(allocations >= 1);
}
