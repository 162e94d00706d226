// The NIC's events through Boost.Asio (rig/asio_events.hpp), driven by the model's faults on the
// family under test: the port going down and up, a queue pair failed by a WRITE to a bad key, the
// function dying; queued events, handlers never run inside async_next, close completing a
// pending wait with aborted.
#include <chrono>
#include <cstdint>
#include <future>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "rig/asio_events.hpp"
#include "rig/nic.hpp"
#include "rig/qp.hpp"
#include "test/model/qp_api/served_nics.hpp"

namespace {

using namespace std::chrono_literals;
using rig::asio::nic_event;
using rig::test::ok;
using rig::test::value;

// An io_context run on its own thread for the test's length, and the events of two NICs of the
// family under test on one wire, attached before they open.
struct evented {
    boost::asio::io_context io;
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
    std::thread runner{[this] { io.run_for(60s); }};
    rig::asio::nic_events events{io.get_executor()};
    std::optional<rig::test::two_served_functions> t;

    evented() {
        rig::nic_options o;
        events.attach(o);
        t.emplace(1 << 16, rig::access::remote, o);
    }
    ~evented() {
        t.reset();
        events.close();
        work.reset();
        io.stop();
        runner.join();
    }
    // The next event within `bound`, by use_future.
    std::optional<nic_event> next(std::chrono::milliseconds bound = 5s) {
        std::future<nic_event> f = events.async_next(boost::asio::use_future);
        if (f.wait_for(bound) != std::future_status::ready) {
            return std::nullopt;
        }
        return f.get();
    }
    // Events until one of kind `k` comes (others on the way are skipped), within 5 s.
    std::optional<nic_event> until(nic_event::kind k) {
        const auto end = std::chrono::steady_clock::now() + 5s;
        while (std::chrono::steady_clock::now() < end) {
            auto e = next(std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()));
            if (e && e->what == k) {
                return e;
            }
        }
        return std::nullopt;
    }
};

}  // namespace

TEST_CASE("NIC events: the port going down and up reaches async_next", "[model][api][asio][events]") {
    evented x;
    REQUIRE(x.t->m1.set_link(false));
    auto down = x.until(nic_event::kind::port_down);
    REQUIRE(down.has_value());
    CHECK(down->name == "PORT_DOWN");
    REQUIRE(x.t->m1.set_link(true));
    auto up = x.until(nic_event::kind::port_up);
    REQUIRE(up.has_value());
}

TEST_CASE("NIC events: a queue pair the NIC fails is named with the family's reason", "[model][api][asio][events]") {
    evented x;
    rig::queue_pair a = value(x.t->n1->make_qp());
    rig::queue_pair b = value(x.t->n2->make_qp());
    ok(a.connect(b.local()));
    ok(b.connect(a.local()));
    // A WRITE to a bad key: the responder raises its queue pair's failure (mlx5
    // WQ_ACCESS_ERROR, bnxt QP_ERROR_NOTIFICATION; bnxt's requester too)
    rig::remote bad = x.t->r2.remote(0);
    bad.key ^= 0x4400;
    a.write(x.t->r1, 0, 64, bad);
    REQUIRE(a.wait(rig::side::send, 5s).has_value());
    auto failed = x.until(nic_event::kind::queue_pair_failed);
    REQUIRE(failed.has_value());
    INFO(failed->name);
    CHECK((failed->qp == b.number() || failed->qp == a.number()));
    if (x.t->m2.mlx5) {
        CHECK(failed->qp == b.number());
        CHECK(failed->name.find("ACCESS") != std::string::npos);
    }
    CHECK_FALSE(failed->name.empty());
    CHECK_FALSE(failed->failure.has_value());
}

TEST_CASE("NIC events: the function dying is the NIC's failure, with its error", "[model][api][asio][events]") {
    evented x;
    x.t->m1.die();
    auto dead = x.until(nic_event::kind::nic_failed);
    REQUIRE(dead.has_value());
    REQUIRE(dead->failure.has_value());
    CHECK_FALSE(dead->failure->message.empty());
    CHECK(dead->name == dead->failure->message);
}

TEST_CASE("NIC events: a queued event's handler runs after async_next returns; close aborts a pending wait",
          "[model][api][asio][events]") {
    evented x;
    REQUIRE(x.t->m1.set_link(false));
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (x.events.queued() == 0 && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(1ms);
    }
    REQUIRE(x.events.queued() >= 1);
    // run by the io_context's thread (the executor given), never inside the call on this one
    std::promise<bool> ran;
    const std::thread::id caller = std::this_thread::get_id();
    x.events.async_next([&](boost::system::error_code code, nic_event) {
        ran.set_value(std::this_thread::get_id() == x.runner.get_id() && std::this_thread::get_id() != caller && !code);
    });
    auto f = ran.get_future();
    REQUIRE(f.wait_for(5s) == std::future_status::ready);
    CHECK(f.get());

    std::future<nic_event> pending = x.events.async_next(boost::asio::use_future);
    x.events.close();
    REQUIRE(pending.wait_for(5s) == std::future_status::ready);
    try {
        pending.get();
        FAIL("a closed queue's wait completed without an error");
    } catch (const boost::system::system_error& e) {
        CHECK(e.code() == rig::asio::make_error_code(rig::asio::errc::aborted));
    }
    // after close, at once aborted too
    std::future<nic_event> later = x.events.async_next(boost::asio::use_future);
    REQUIRE(later.wait_for(5s) == std::future_status::ready);
    CHECK_THROWS_AS(later.get(), boost::system::system_error);
}

TEST_CASE("NIC events: a full queue drops its oldest and the next event says how many; callbacks held before "
          "attach still run",
          "[model][api][asio][events]") {
    boost::asio::io_context io;
    rig::asio::nic_events events(io.get_executor(), /*capacity=*/2);
    int before = 0;
    rig::nic_options o;
    o.port_change = [&](bool) { ++before; };
    events.attach(o);
    // as the NIC's event thread calls them: four events, no wait pending
    o.port_change(false);
    o.port_change(true);
    o.qp_event(7, "WQ_CATAS_ERROR", true);
    o.fatal(rig::plain_error(rig::error_kind::firmware, "gone"));
    CHECK(before == 2);
    CHECK(events.queued() == 2);
    std::vector<nic_event> got;
    for (int i = 0; i < 2; ++i) {
        events.async_next([&](boost::system::error_code code, nic_event e) {
            REQUIRE_FALSE(code);
            got.push_back(std::move(e));
        });
    }
    CHECK(got.empty());   // posted, not run inside async_next
    io.run_for(1s);
    REQUIRE(got.size() == 2);
    CHECK(got[0].what == nic_event::kind::queue_pair_failed);
    CHECK(got[0].qp == 7);
    CHECK(got[0].name == "WQ_CATAS_ERROR");
    CHECK(got[0].dropped == 2);   // the two port events
    CHECK(got[1].what == nic_event::kind::nic_failed);
    CHECK(got[1].failure->message == "gone");
    CHECK(got[1].dropped == 0);
}
