// The device's removal request (VFIO's request IRQ, nic_options::removal_requested) from the
// model's vfio-user server, per family: the NIC tells the application with the deadline; closed
// in time it lets go cleanly; not closed, it fails at the deadline (queue pairs' entries complete
// with the NIC's failure, the fatal callback says why), lets go of the device (the server sees
// its client leave), and a post after that writes its doorbell into nothing instead of faulting.
#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "rig/nic.hpp"
#include "rig/qp.hpp"
#include "sim/vfio_user/device.hpp"
#include "test/model/qp_api/served_nics.hpp"

namespace {

using namespace std::chrono_literals;
using rig::test::ok;
using rig::test::value;
namespace vu = rig::sim::vfio_user;

// Whether `done` becomes true within 5 s.
template <class F>
bool within_5s(F done) {
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (!done()) {
        if (std::chrono::steady_clock::now() > end) {
            return false;
        }
        std::this_thread::sleep_for(1ms);
    }
    return true;
}

}  // namespace

TEST_CASE("removal: the NIC hears the request with its deadline, and closed in time lets go of the device",
          "[model][api][removal]") {
    std::atomic<long> deadline_ms{-1};
    std::atomic<rig::nic*> target = nullptr;   // set after open, read on the NIC's event thread
    std::atomic<int> closed_in_callback{-1};      // checked here: Catch2 asserts on one thread only
    rig::nic_options o;
    o.removal_deadline = 3s;
    o.removal_requested = [&](std::chrono::milliseconds d) {
        deadline_ms = static_cast<long>(d.count());
        closed_in_callback = target.load()->close().has_value() ? 1 : 0;   // close() from the callback's thread
    };
    rig::test::two_served_functions t(1 << 16, rig::access::remote, o);
    target = t.n1.get();
    REQUIRE(t.m1.srv->client_connected());
    REQUIRE(t.m1.srv->trigger(vu::irq::req, 0));
    REQUIRE(within_5s([&] { return !t.m1.srv->client_connected(); }));
    CHECK(deadline_ms == 3000);
    CHECK(closed_in_callback == 1);
    CHECK(t.n1->closed());
    // the other NIC heard nothing
    CHECK(t.m2.srv->client_connected());
    CHECK_FALSE(t.n2->closed());
}

TEST_CASE("removal: not closed by the deadline, the NIC fails, lets go, and later posts touch nothing",
          "[model][api][removal]") {
    std::atomic<int> requests{0};
    std::optional<std::string> why;
    std::mutex why_lock;
    rig::nic_options o;
    o.removal_deadline = 300ms;
    o.removal_requested = [&](std::chrono::milliseconds) { ++requests; };
    o.fatal = [&](const rig::error& e) {
        std::lock_guard g(why_lock);
        why = e.message;
    };
    rig::test::two_served_nics t(1 << 16, rig::access::remote, o);
    t.a.receive(t.r1, 0, 64);
    const auto asked = std::chrono::steady_clock::now();
    REQUIRE(t.m1.srv->trigger(vu::irq::req, 0));
    // the receive completes with the NIC's failure once the deadline passed, not before
    auto c = t.a.wait(rig::side::receive, 5s);
    const auto failed_after = std::chrono::steady_clock::now() - asked;
    REQUIRE(c.has_value());
    REQUIRE_FALSE(c->has_value());
    CHECK(c->error().message.find("NIC failed") != std::string::npos);
    CHECK(failed_after >= 300ms);
    CHECK(requests == 1);
    REQUIRE(within_5s([&] { return !t.m1.srv->client_connected(); }));
    {
        std::lock_guard g(why_lock);
        REQUIRE(why.has_value());
        CHECK(why->find("removal") != std::string::npos);
    }
    // the BARs are placeholders now: a post rings a doorbell into private memory, no fault, and
    // its entry completes with the failure
    t.a.write(t.r1, 0, 8, t.r2.remote(0));
    auto w = t.a.poll(rig::side::send);
    REQUIRE(w.has_value());
    CHECK_FALSE(w->has_value());
    static_cast<void>(t.n1->close());   // completes (its commands refused: the device is gone)
    CHECK(t.n1->closed());
}
