// firmware/mlx5 events and health: the driver's async EQ, event-mode commands, page requests,
// port changes and the health watch, against the mlx5 function model over vfio-user. The NIC
// is brought up with raw commands (ENABLE_HCA .. INIT_HCA, ALLOC_UAR) so that these tests do
// not depend on the bring-up state machine that uses them.
#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "abi/bits.hpp"
#include "abi/mlx5/ifc.hpp"
#include "firmware/mlx5/command_queue.hpp"
#include "firmware/mlx5/events.hpp"
#include "firmware/mlx5/health.hpp"
#include "firmware/mlx5/pages.hpp"
#include "firmware/mlx5/objects.hpp"  // after pages.hpp: its `deadline` alias shadows pages.hpp's parameters
#include "firmware/mlx5/stranded.hpp"
#include "sim/mlx5/function_model.hpp"
#include "test/model/served_model.hpp"
#include "test/within.hpp"

namespace {

using namespace std::chrono_literals;
namespace ifc = rig::mlx5::ifc;
namespace abi = rig::abi;
namespace fw = rig::firmware::mlx5;
namespace model = rig::sim::mlx5;
using ifc::opcode;
using clk = std::chrono::steady_clock;

clk::time_point in(clk::duration d) { return clk::now() + d; }

using rig::test::make;

template <class T>
void require_ok(const fw::result<T>& r) {
    if (!r) {
        FAIL(r.error().message);
    }
}

// Open file descriptors and threads of this process: what stop() must give back.
std::size_t entries_in(const char* dir) {
    std::size_t n = 0;
    if (DIR* d = ::opendir(dir)) {
        while (::readdir(d) != nullptr) {
            ++n;
        }
        ::closedir(d);
    }
    return n;
}

// Waits (up to 2 s) for a condition that another thread makes true.
template <class F>
bool eventually(F f, clk::duration limit = 2s) {
    return rig::test::within(limit, f);
}

// What the handlers saw.
struct seen {
    std::mutex lock;
    std::vector<std::pair<std::uint8_t, bool>> ports;
    std::vector<std::pair<std::uint32_t, std::uint8_t>> qp_events;
    std::vector<std::uint32_t> completions;
    std::vector<std::string> fatal;
    std::vector<std::string> handler_errors;  // Catch2 assertions are for the test's thread only
    std::atomic<int> page_requests{0};
};

// A model brought up to INIT_HCA with raw commands, a UAR, and the driver's page supply.
struct nic {
    rig::test::served_model t;
    std::unique_ptr<fw::command_queue> q;
    fw::stranded_memory stranded;
    fw::doorbell_records records{*t.f, stranded};
    std::unique_ptr<fw::page_supply> pages;
    std::uint32_t uar = 0;
    seen got;

    static model::function_options options() {
        model::function_options o;
        o.init_time = 1ms;
        return o;
    }

    explicit nic(model::function_options o = options()) : t(o) {
        auto created = fw::command_queue::create(*t.f);
        require_ok(created);
        q = std::move(*created);
        pages = std::make_unique<fw::page_supply>(*t.f, *q, stranded);
        require_ok(q->exec<ifc::enable_hca_in, ifc::enable_hca_out>(make<ifc::enable_hca_in>(opcode::enable_hca), in(1s)));
        auto issi = make<ifc::set_issi_in>(opcode::set_issi);
        abi::set<ifc::set_issi_in::current_issi>(issi, 1);
        require_ok(q->exec<ifc::set_issi_in, ifc::set_issi_out>(issi, in(1s)));
        require_ok(pages->satisfy(ifc::query_pages_op_mod::boot_pages, in(1s)));
        require_ok(pages->satisfy(ifc::query_pages_op_mod::init_pages, in(1s)));
        require_ok(q->exec<ifc::init_hca_in, ifc::init_hca_out>(make<ifc::init_hca_in>(opcode::init_hca), in(1s)));
        auto u = fw::alloc_uar(*q, in(1s));
        require_ok(u);
        uar = *u;
    }

    fw::event_handlers handlers() {
        fw::event_handlers h;
        h.page_request = [this](std::uint16_t function_id, std::int32_t n) {
            std::string problem;
            if (function_id != 0) {
                problem = "page request for function " + std::to_string(function_id);
            } else if (n > 0) {
                auto r = pages->give(static_cast<std::size_t>(n), in(1s), fw::page_supply::slot::page_request);
                problem = r ? "" : r.error().message;
            } else {
                auto r = pages->take(static_cast<std::size_t>(-n), in(1s), fw::page_supply::slot::page_request);
                problem = !r ? r.error().message : *r != static_cast<std::size_t>(-n) ? "took fewer pages" : "";
            }
            if (!problem.empty()) {
                std::lock_guard g(got.lock);
                got.handler_errors.push_back(problem);
            }
            ++got.page_requests;
        };
        h.port_change = [this](std::uint8_t port, bool up) {
            std::lock_guard g(got.lock);
            got.ports.emplace_back(port, up);
        };
        h.completion = [this](std::uint32_t cqn) {
            std::lock_guard g(got.lock);
            got.completions.push_back(cqn);
        };
        h.qp_event = [this](std::uint32_t qpn, std::uint8_t type) {
            std::lock_guard g(got.lock);
            got.qp_events.emplace_back(qpn, type);
        };
        h.fatal = [this](const fw::error& e) {
            std::lock_guard g(got.lock);
            got.fatal.push_back(e.message);
            if (e.kind != fw::error_kind::fatal) {
                got.handler_errors.push_back("fatal handler got kind " + std::string(fw::to_string(e.kind)));
            }
        };
        return h;
    }

    std::unique_ptr<fw::events> start(std::chrono::milliseconds health = 20ms) {
        fw::events_options o;
        o.health.interval = health;
        o.stranded = &stranded;
        auto ev = fw::events::start(*t.f, *q, uar, handlers(), o, in(1s));
        require_ok(ev);
        return std::move(*ev);
    }

    // A 64-entry CQ whose events go to EQ `eqn`.
    fw::result<fw::cq> make_cq(std::uint32_t eqn) {
        fw::cq_params p;
        p.log_size = 6;
        p.uar = uar;
        p.eqn = eqn;
        return fw::cq::create(*q, *t.f, stranded, records, p, in(1s));
    }

    fw::result<std::vector<std::byte>> nop(clk::time_point by) {
        return q->exec<ifc::nop_in, ifc::nop_out>(make<ifc::nop_in>(opcode::nop), by);
    }

    std::size_t fatal_calls() {
        std::lock_guard g(got.lock);
        return got.fatal.size();
    }

    // The kernel's teardown order after the EQ (main.c mlx5_function_teardown): TEARDOWN_HCA, pages
    // taken back, DISABLE_HCA, so that the model never sees pages it owns unmapped. A failed NIC's
    // pages were stranded by the test.
    ~nic() {
        if (!q->failure() && !t.fn.failed()) {
            static_cast<void>(q->exec<ifc::teardown_hca_in, ifc::teardown_hca_out>(
                make<ifc::teardown_hca_in>(opcode::teardown_hca), in(1s)));
            if (auto r = pages->reclaim(in(1s)); !r) {
                FAIL_CHECK("reclaim: " << r.error().message);
            }
            static_cast<void>(q->exec<ifc::disable_hca_in, ifc::disable_hca_out>(
                make<ifc::disable_hca_in>(opcode::disable_hca), in(1s)));
        } else if (pages->given() != 0) {
            pages->strand("the test left the firmware failed or silent");
        }
        std::lock_guard g(got.lock);
        for (const auto& e : got.handler_errors) {
            FAIL_CHECK("handler: " << e);
        }
    }
};

}  // namespace

TEST_CASE("mlx5 events: commands complete by CMD event once the EQ runs", "[model][mlx5]") {
    nic n;
    CHECK_FALSE(n.q->uses_events());
    const auto interrupts_before = n.t.fn.interrupts_raised();
    auto ev = n.start();
    CHECK(n.q->uses_events());
    CHECK(ev->running());
    CHECK(ev->uar() == n.uar);

    // 600 commands: their CMD EQEs wrap the 256-entry EQ twice (owner parity flips), and the
    // consumer index is written back often enough that the model sees no overrun
    for (int i = 0; i < 600; ++i) {
        require_ok(n.nop(in(1s)));
    }
    // every completion comes as a CMD EQE (the last may be taken just after its command saw
    // the entry handed back), each raising MSI-X vector 0 of an armed EQ
    CHECK(eventually([&] { return ev->counts().commands >= 600; }));
    const auto c = ev->counts();
    CHECK(c.eqes >= 600);
    CHECK(n.fatal_calls() == 0);
    CHECK_FALSE(n.t.fn.failed());
    CHECK(c.interrupts >= 1);
    CHECK(n.t.fn.interrupts_raised() > interrupts_before);
    // a failing command still reports its status and syndrome by event
    auto bad = make<ifc::nop_in>(static_cast<opcode>(0x7ff));
    auto r = n.q->exec(bad, ifc::nop_out::size_bytes, in(1s));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == fw::error_kind::status);
    CHECK(r.error().status == ifc::cmd_status::bad_op_err);

    require_ok(ev->stop(n.stranded, in(1s)));
    CHECK_FALSE(n.q->uses_events());
    CHECK(n.stranded.report().empty());
    CHECK(n.q->stranded().empty());
}

TEST_CASE("mlx5 events: concurrent commands from several threads get their own outputs", "[model][mlx5]") {
    auto o = nic::options();
    o.command_latency = 300us;  // long enough that commands overlap in the device
    nic n(o);
    auto ev = n.start();

    constexpr int threads = 4;
    constexpr int each = 25;
    std::vector<std::vector<std::uint32_t>> pds(threads);
    std::atomic<int> failures{0};
    std::vector<std::thread> workers;
    const auto batch_start = clk::now();
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
            for (int i = 0; i < each; ++i) {
                if (t % 2 == 0) {
                    auto r = n.q->exec<ifc::alloc_pd_in, ifc::alloc_pd_out>(make<ifc::alloc_pd_in>(opcode::alloc_pd),
                                                                           in(2s));
                    if (!r) {
                        ++failures;
                        continue;
                    }
                    pds[static_cast<std::size_t>(t)].push_back(static_cast<std::uint32_t>(abi::get<ifc::alloc_pd_out::pd>(*r)));
                } else {
                    auto r = n.q->exec<ifc::query_issi_in, ifc::query_issi_out>(
                        make<ifc::query_issi_in>(opcode::query_issi), in(2s));
                    if (!r || abi::get<ifc::query_issi_out::current_issi>(*r) != 1 ||
                        abi::get<ifc::query_issi_out::supported_issi_dw0>(*r) != 0x3) {
                        ++failures;
                    }
                }
            }
        });
    }
    for (auto& w : workers) {
        w.join();
    }
    // Each waiter slept until its CMD event: had the events not come, each command would have
    // waited out its 2 s deadline before finding its entry handed back.
    CHECK(clk::now() - batch_start < 1500ms);
    CHECK(failures == 0);
    std::set<std::uint32_t> unique;
    std::size_t total = 0;
    for (const auto& v : pds) {
        total += v.size();
        unique.insert(v.begin(), v.end());
    }
    CHECK(total == (threads / 2) * each);
    CHECK(unique.size() == total);  // every ALLOC_PD got its own answer
    CHECK(eventually([&] { return ev->counts().commands >= 1; }));
    require_ok(ev->stop(n.stranded, in(1s)));
}

TEST_CASE("mlx5 events: page requests mid-run are answered on the page slot", "[model][mlx5]") {
    nic n;
    auto ev = n.start();
    const auto owned = n.t.fn.pages_owned();
    REQUIRE(owned == n.pages->given());
    CHECK_FALSE(n.t.fn.last_completion(n.q->page_slot()).ran);  // no user command took it

    REQUIRE(n.t.fn.request_pages(8));
    REQUIRE(eventually([&] { return n.got.page_requests.load() == 1; }));
    CHECK(n.t.fn.pages_owned() == owned + 8);
    CHECK(n.pages->given() == owned + 8);
    CHECK(n.t.fn.last_completion(n.q->page_slot()).ran);  // MANAGE_PAGES went on slot 31
    require_ok(n.nop(in(1s)));  // user commands go on meanwhile

    REQUIRE(n.t.fn.request_pages(-5));
    REQUIRE(eventually([&] { return n.got.page_requests.load() == 2; }));
    CHECK(n.t.fn.pages_owned() == owned + 3);
    CHECK(n.pages->given() == owned + 3);
    CHECK(ev->counts().page_requests == 2);
    require_ok(ev->stop(n.stranded, in(1s)));
}

TEST_CASE("mlx5 events: port changes and QP events reach their handlers", "[model][mlx5]") {
    nic n;
    auto ev = n.start();
    REQUIRE(n.t.fn.set_port_state(false));
    REQUIRE(eventually([&] {
        std::lock_guard g(n.got.lock);
        return n.got.ports.size() == 1;
    }));
    REQUIRE(n.t.fn.set_port_state(true));
    REQUIRE(eventually([&] {
        std::lock_guard g(n.got.lock);
        return n.got.ports.size() == 2;
    }));
    REQUIRE(n.t.fn.post_qp_event(0x1234, static_cast<std::uint8_t>(ifc::event_type::wq_catas_error)));
    REQUIRE(eventually([&] {
        std::lock_guard g(n.got.lock);
        return n.got.qp_events.size() == 1;
    }));
    {
        std::lock_guard g(n.got.lock);
        CHECK(n.got.ports[0] == std::pair<std::uint8_t, bool>{1, false});
        CHECK(n.got.ports[1] == std::pair<std::uint8_t, bool>{1, true});
        CHECK(n.got.qp_events[0] ==
              std::pair<std::uint32_t, std::uint8_t>{0x1234, static_cast<std::uint8_t>(ifc::event_type::wq_catas_error)});
    }
    CHECK(ev->counts().port_changes == 2);
    CHECK(n.fatal_calls() == 0);
    require_ok(ev->stop(n.stranded, in(1s)));
}

TEST_CASE("mlx5 events: a handler on the event thread may issue a command", "[model][mlx5]") {
    nic n;
    fw::events_options o;
    o.health.interval = 20ms;
    o.stranded = &n.stranded;
    auto h = n.handlers();
    std::atomic<int> answered{0};
    std::atomic<bool> by_time{false};
    h.port_change = [&](std::uint8_t, bool) {
        // polled: the event thread is the one that would take this command's CMD event
        const auto t0 = clk::now();
        if (n.nop(in(2s))) {
            ++answered;
            by_time = clk::now() - t0 < 1s;
        }
    };
    auto ev = fw::events::start(*n.t.f, *n.q, n.uar, h, o, in(1s));
    require_ok(ev);
    REQUIRE(n.t.fn.set_port_state(false));
    REQUIRE(eventually([&] { return answered.load() == 1; }));
    CHECK(by_time);
    require_ok(n.nop(in(1s)));
    require_ok((*ev)->stop(n.stranded, in(1s)));
}

TEST_CASE("mlx5 events: COMP events of a CQ on the EQ reach the completion handler", "[model][mlx5]") {
    nic n;
    // A short health interval: cq::create calls into the function from this thread while the
    // event thread reads the health registers (driver::function calls are thread-safe).
    auto ev = n.start(5ms);
    auto cq = n.make_cq(ev->eqn());
    require_ok(cq);
    REQUIRE(n.t.fn.post_completion(cq->cqn()));
    REQUIRE(n.t.fn.post_completion(cq->cqn()));
    REQUIRE(eventually([&] {
        std::lock_guard g(n.got.lock);
        return n.got.completions.size() == 2;
    }));
    {
        std::lock_guard g(n.got.lock);
        CHECK(n.got.completions[0] == cq->cqn());
        CHECK(n.got.completions[1] == cq->cqn());
    }
    CHECK(ev->counts().completions == 2);
    require_ok(cq->destroy(*n.q, *n.t.f, n.stranded, in(1s)));
    require_ok(ev->stop(n.stranded, in(1s)));
}

// The interrupt into a guest can come tens of milliseconds after the CMD EQE (QEMU TCG: the
// guest suite's mlx5 steps took 4x as long as without waiting for it). A waiting command looks
// at its entry's ownership byte every millisecond, and a DESTROY asks the event thread to take
// the EQEs already written (look_now) rather than waiting for their interrupt.
TEST_CASE("mlx5 events: commands whose interrupts are lost complete, a DESTROY with its own CMD event taken",
          "[model][mlx5]") {
    auto o = nic::options();
    o.command_latency = 2ms;   // every command waits for its completion, past the waiter's spin
    nic n(o);
    auto ev = n.start(60s);   // no health check to wake the event thread during the test
    auto cq = n.make_cq(ev->eqn());
    require_ok(cq);
    REQUIRE(eventually([&] { return ev->counts().eqes == n.t.fn.events_posted(); }));

    n.t.fn.withhold_interrupts(true);
    const auto seen = ev->counts();
    const auto raised = n.t.fn.interrupts_raised();
    // Waiting for the interrupt, the first would come back only at its deadline (handed back,
    // its CMD event lost: the kernel's mlx5_cmd_eq_recover case).
    const auto by = in(5s);
    for (int i = 0; i < 5; ++i) {
        require_ok(n.nop(by));
    }
    CHECK(clk::now() < by);
    CHECK(n.t.fn.interrupts_raised() > raised);   // the model raised one (the EQ stays disarmed)
    CHECK(ev->counts().commands == seen.commands); // and nothing woke the event thread
    CHECK(ev->counts().interrupts == seen.interrupts);

    // The DESTROY returns only once the event thread took its CMD event (without look_now: after
    // the 1 s grace, the event still untaken)
    require_ok(cq->destroy(*n.q, *n.t.f, n.stranded, in(2s)));
    const auto after = ev->counts();
    CHECK(after.commands > seen.commands);
    CHECK(after.eqes == n.t.fn.events_posted());
    CHECK(after.interrupts == seen.interrupts);

    n.t.fn.withhold_interrupts(false);
    require_ok(n.nop(in(1s)));
    require_ok(ev->stop(n.stranded, in(1s)));
}

TEST_CASE("mlx5 events: a fatal health report fails waiting and later commands", "[model][mlx5]") {
    nic n;
    auto ev = n.start(20ms);
    n.t.fn.silence();  // the NOP below stays with the device
    fw::result<std::vector<std::byte>> pending = std::vector<std::byte>{};
    clk::duration took{};
    std::thread waiter([&] {
        const auto t0 = clk::now();
        pending = n.nop(in(5s));
        took = clk::now() - t0;
    });
    REQUIRE(eventually([&] { return n.t.fn.commands_pending() != 0; }));
    n.t.fn.fatal(0x1, 0x1234);
    waiter.join();
    REQUIRE_FALSE(pending.has_value());
    CHECK(pending.error().kind == fw::error_kind::fatal);
    CHECK(pending.error().opcode == opcode::nop);
    CHECK(took < 500ms);  // a few 20 ms health intervals, not the 5 s deadline
    // the queue is failed first (waiters return at once), then the handler runs
    REQUIRE(eventually([&] { return n.fatal_calls() == 1; }));
    {
        std::lock_guard g(n.got.lock);
        CHECK(n.got.fatal[0].find("health: FW internal error (synd 0x1), ext_synd 0x1234") != std::string::npos);
    }
    CHECK(n.q->failure().has_value());
    CHECK(ev->failed());
    // the waiting command's slot stays with the device
    CHECK(n.q->stranded().size() == 1);

    // later commands are refused at once and never reach the device
    const auto pending_slots = n.t.fn.commands_pending();
    const auto t0 = clk::now();
    auto later = n.nop(in(2s));
    CHECK(clk::now() - t0 < 100ms);
    REQUIRE_FALSE(later.has_value());
    CHECK(later.error().kind == fw::error_kind::fatal);
    CHECK(later.error().message.find("FW internal error") != std::string::npos);
    CHECK(n.t.fn.commands_pending() == pending_slots);
    CHECK(n.q->stranded().size() == 1);

    // stop completes locally: DESTROY_EQ is refused (fatal), the EQ's buffer is stranded
    auto s = ev->stop(n.stranded, in(1s));
    REQUIRE_FALSE(s.has_value());
    CHECK(s.error().kind == fw::error_kind::fatal);
    CHECK_FALSE(ev->running());
    CHECK_FALSE(n.stranded.report().empty());
    require_ok(ev->stop(n.stranded, in(1s)));  // idempotent
    CHECK(n.fatal_calls() == 1);
}

TEST_CASE("mlx5 events: firmware silence times out within the deadline, slot stranded", "[model][mlx5]") {
    nic n;
    auto ev = n.start(20ms);
    n.t.fn.silence();
    const auto t0 = clk::now();
    auto r = n.nop(in(150ms));
    const auto took = clk::now() - t0;
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == fw::error_kind::timeout);
    CHECK(r.error().message.find("NOP") != std::string::npos);
    CHECK(took >= 150ms);
    CHECK(took < 400ms);
    auto s = n.q->stranded();
    REQUIRE(s.size() == 1);
    CHECK(s[0].opcode == opcode::nop);
    CHECK(s[0].slot != n.q->page_slot());
    CHECK(n.fatal_calls() == 0);  // silence is not a health failure: the heartbeat goes on

    n.t.fn.resume();
    require_ok(n.nop(in(1s)));  // another slot
    require_ok(ev->stop(n.stranded, in(1s)));
}

TEST_CASE("mlx5 events: the function dying fails the NIC", "[model][mlx5]") {
    nic n;
    auto ev = n.start(20ms);
    n.t.fn.die();
    REQUIRE(eventually([&] { return n.fatal_calls() == 1; }, 1s));
    {
        std::lock_guard g(n.got.lock);
        CHECK(n.got.fatal[0].find("health: the function is gone") != std::string::npos);
    }
    auto r = n.nop(in(1s));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == fw::error_kind::fatal);
    static_cast<void>(ev->stop(n.stranded, in(1s)));
    CHECK_FALSE(ev->running());
}

TEST_CASE("mlx5 events: a small EQ wraps many times under concurrent commands", "[model][mlx5]") {
    nic n;
    fw::events_options o;
    o.log_eq_size = 6;  // 64 EQEs: the consumer index is written back every 32
    o.stranded = &n.stranded;
    auto ev = fw::events::start(*n.t.f, *n.q, n.uar, n.handlers(), o, in(1s));
    require_ok(ev);
    std::atomic<int> failures{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < 3; ++t) {
        workers.emplace_back([&] {
            for (int i = 0; i < 150; ++i) {
                if (!n.nop(in(2s))) {
                    ++failures;
                }
            }
        });
    }
    for (auto& w : workers) {
        w.join();
    }
    CHECK(failures == 0);
    CHECK(eventually([&] { return (*ev)->counts().eqes >= 64 * 2; }));
    CHECK_FALSE(n.t.fn.failed());
    require_ok((*ev)->stop(n.stranded, in(1s)));
}

// Commands polled while the EQ still runs (command_queue::use_events(false), as fw-bench does)
// still write a CMD EQE each. The event thread must get its turn on the function's control lock
// for the EQ doorbell between one thread's back-to-back command doorbells, or the EQ overruns and
// the model raises the fatal syndrome a card would (0xc, ASYNCHRONOUS_EQ_BUF_OVERRUN).
TEST_CASE("mlx5 events: polled commands back to back leave the event thread its EQ doorbell", "[model][mlx5]") {
    nic n;
    fw::events_options o;
    o.log_eq_size = 6;  // 64 EQEs: overrun after 64 unacknowledged completions
    o.stranded = &n.stranded;
    auto ev = fw::events::start(*n.t.f, *n.q, n.uar, n.handlers(), o, in(1s));
    require_ok(ev);
    n.q->use_events(false);
    int done = 0;
    for (; done < 64 * 30; ++done) {
        if (auto r = n.nop(in(2s)); !r) {
            FAIL("NOP " << done << ": " << r.error().message);
        }
    }
    CHECK(done == 64 * 30);
    CHECK(eventually([&] { return (*ev)->counts().eqes >= 64 * 30; }));
    CHECK_FALSE(n.t.fn.failed());
    require_ok((*ev)->stop(n.stranded, in(1s)));
}

TEST_CASE("mlx5 events: stop is idempotent and leaves no MSI-X, eventfd or thread", "[model][mlx5]") {
    nic n;
    const auto fds = entries_in("/proc/self/fd");
    const auto threads = entries_in("/proc/self/task");
    const auto objects = n.t.fn.objects();
    auto ev = n.start();
    CHECK(entries_in("/proc/self/task") == threads + 2);  // event thread, page worker
    CHECK(n.t.fn.objects() == objects + 1);               // the EQ
    require_ok(n.nop(in(1s)));

    require_ok(ev->stop(n.stranded, in(1s)));
    CHECK_FALSE(ev->running());
    CHECK_FALSE(n.q->uses_events());
    CHECK(n.t.fn.objects() == objects);
    CHECK(entries_in("/proc/self/fd") == fds);
    CHECK(entries_in("/proc/self/task") == threads);
    require_ok(ev->stop(n.stranded, in(1s)));

    // polling again: no EQ takes the completion, no interrupt is raised
    const auto interrupts = n.t.fn.interrupts_raised();
    require_ok(n.nop(in(1s)));
    CHECK(n.t.fn.interrupts_raised() == interrupts);
    CHECK(n.stranded.report().empty());

    // and events start again on the same queue
    auto again = n.start();
    require_ok(n.nop(in(1s)));
    CHECK(eventually([&] { return again->counts().commands >= 1; }));
    require_ok(again->stop(n.stranded, in(1s)));
}

TEST_CASE("mlx5 events: a refused start leaves the queue polling, no MSI-X, no thread", "[model][mlx5]") {
    nic n;
    const auto fds = entries_in("/proc/self/fd");
    const auto threads = entries_in("/proc/self/task");
    const auto objects = n.t.fn.objects();
    fw::events_options o;
    o.stranded = &n.stranded;
    // a UAR the firmware never allocated: CREATE_EQ is refused with a status
    auto ev = fw::events::start(*n.t.f, *n.q, n.uar + 1, n.handlers(), o, in(1s));
    REQUIRE_FALSE(ev.has_value());
    CHECK(ev.error().kind == fw::error_kind::status);
    CHECK(ev.error().opcode == opcode::create_eq);
    CHECK_FALSE(n.q->uses_events());
    CHECK(n.t.fn.objects() == objects);
    CHECK(entries_in("/proc/self/fd") == fds);
    CHECK(entries_in("/proc/self/task") == threads);
    CHECK(n.stranded.report().empty());
    require_ok(n.nop(in(1s)));  // polled
    // misuse is thrown before anything is touched
    o.log_eq_size = 3;
    CHECK_THROWS_AS(fw::events::start(*n.t.f, *n.q, n.uar, n.handlers(), o, in(1s)), std::invalid_argument);
}

TEST_CASE("mlx5 health: syndrome names", "[mlx5]") {
    CHECK(fw::health_syndrome_name(0x1) == "FW internal error");
    CHECK(fw::health_syndrome_name(0x7) == "irisc not responding");
    CHECK(fw::health_syndrome_name(0xc) == "async EQ buffer overrun");
    CHECK(fw::health_syndrome_name(0x42) == "unrecognized error");
}
