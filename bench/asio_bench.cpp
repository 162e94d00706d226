// bench-asio: the latency of one 64-byte WRITE through the Boost.Asio adapter (rig/asio.hpp,
// async_write with use_awaitable in a coroutine) against the synchronous API, on two function
// models of one family on one in-process wire, served by this process and opened through the
// public API (--family mlx5|bnxt; both by default). Prints figures, asserts nothing.
//
// Each path posts one WRITE and waits for its completion before the next (a ping of the NIC):
//   sync, own CQ       queue_pair::write, then queue_pair::poll until it completes (spinning);
//   sync, group        queue_pair::write on a queue pair of a group, then completion_group::poll
//                      until it completes (spinning);
//   sync, group wait   the same with completion_group::wait: it sleeps on the eventfd (poll(2));
//   async, sleeping    co_await async_write(..., use_awaitable): the io_context thread sleeps on
//                      the group's eventfd (drain-arm-drain) until the completion's event;
//   async, spinning    the same with options::spin: the adapter polls (through the executor's
//                      queue) instead of sleeping.
// Median and 99th percentile over --iterations WRITEs after --warmup, and each median against
// the first row's. The model's NIC is threads of this process sharing the CPUs: the sync poll
// loops yield between polls, or on a small machine (2 CPUs) a loop that never yields keeps the
// model's thread off its CPU for a scheduler slice (bnxt: ~4 ms per WRITE).
//
//   meson compile -C build bench-asio
//   build/bench/asio-bench [--family mlx5|bnxt] [--iterations N] [--warmup N]
#include <utility>   // first: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "bench/served_models.hpp"
#include "rig/asio.hpp"
#include "rig/group.hpp"
#include "rig/nic.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"

namespace {

using clk = std::chrono::steady_clock;
using rig::bench::die;
using rig::bench::ok;
using rig::bench::value;

struct options {
    std::vector<std::string> families{"mlx5", "bnxt"};
    std::size_t iterations = 10000;
    std::size_t warmup = 1000;
};

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) {
            die(a + " needs a value (--family mlx5|bnxt, --iterations N, --warmup N)");
        }
        const std::string v = argv[++i];
        if (a == "--family" && (v == "mlx5" || v == "bnxt")) {
            o.families = {v};
        } else if (a == "--iterations") {
            o.iterations = std::strtoull(v.c_str(), nullptr, 10);
        } else if (a == "--warmup") {
            o.warmup = std::strtoull(v.c_str(), nullptr, 10);
        } else {
            die("unknown option " + a + " " + v + " (--family mlx5|bnxt, --iterations N, --warmup N)");
        }
    }
    if (o.iterations == 0) {
        die("--iterations at least 1");
    }
    return o;
}

struct figures {
    double median_ns = 0;
    double p99_ns = 0;
};

figures summarize(std::vector<double> ns) {
    std::sort(ns.begin(), ns.end());
    return {ns[ns.size() / 2], ns[std::min(ns.size() - 1, ns.size() * 99 / 100)]};
}

double since(clk::time_point t0) { return std::chrono::duration<double, std::nano>(clk::now() - t0).count(); }

// NIC 0's queue pairs, each connected to one of NIC 1: one on its own CQs, one in a group polled
// directly, one per adapter (sleeping, spinning), each adapter on its own group.
struct setup {
    std::unique_ptr<rig::nic> a, b;
    rig::region ra, rb;
    rig::completion_group sync_group, sleep_group, spin_group;
    boost::asio::io_context io;
    rig::asio::group sleeping, spinning;
    rig::queue_pair plain, grouped, async_sleep, async_spin;
    std::vector<rig::queue_pair> peers;

    explicit setup(const rig::bench::served& m) {
        rig::nic_options n;
        n.log_ring_entries = 6;
        a = value(rig::nic::open(m.where(0), n), "open NIC 0");
        b = value(rig::nic::open(m.where(1), n), "open NIC 1");
        ra = value(a->allocate(1 << 16, rig::access::remote), "allocate on NIC 0");
        rb = value(b->allocate(1 << 16, rig::access::remote), "allocate on NIC 1");
        const rig::group_options g{.entries = 256, .log_ring_entries = 6};
        sync_group = value(a->make_group(g), "make_group");
        sleep_group = value(a->make_group(g), "make_group");
        spin_group = value(a->make_group(g), "make_group");
        sleeping = value(rig::asio::group::make(io.get_executor(), sleep_group), "asio::group::make");
        rig::asio::options spin;
        spin.spin = std::chrono::seconds(1);
        spinning = value(rig::asio::group::make(io.get_executor(), spin_group, spin), "asio::group::make");
        plain = value(a->make_qp(), "make_qp");
        grouped = value(a->make_qp(sync_group), "make_qp (group)");
        async_sleep = value(sleeping.make_qp(*a), "asio make_qp");
        async_spin = value(spinning.make_qp(*a), "asio make_qp");
        for (rig::queue_pair* q : {&plain, &grouped, &async_sleep, &async_spin}) {
            peers.push_back(value(b->make_qp(), "make_qp on NIC 1"));
            ok(q->connect(peers.back().local()), "connect");
            ok(peers.back().connect(q->local()), "connect");
        }
    }
    ~setup() {
        sleeping.close();
        spinning.close();
        static_cast<void>(a->close());
        static_cast<void>(b->close());
    }
};

std::vector<double> sync_plain(setup& s, std::size_t n) {
    std::vector<double> ns;
    ns.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        const auto t0 = clk::now();
        s.plain.write(s.ra, 0, 64, s.rb.remote(0));
        std::optional<rig::result<std::uint32_t>> r;
        while (!(r = s.plain.poll(rig::side::send))) {
            std::this_thread::yield();   // the model's NIC shares the CPUs (see the top)
        }
        if (!*r) {
            die("a WRITE failed: " + r->error().message);
        }
        ns.push_back(since(t0));
    }
    return ns;
}

// The group's own CQ: polled (spinning, yielding between looks) or, `sleeping`, through
// completion_group::wait (drain-arm-drain and poll(2) on the eventfd).
std::vector<double> sync_group(setup& s, std::size_t n, bool sleeping) {
    std::vector<double> ns;
    ns.reserve(n);
    std::array<rig::completion, 4> done;
    for (std::size_t i = 0; i < n; ++i) {
        const auto t0 = clk::now();
        s.grouped.write(s.ra, 0, 64, s.rb.remote(0), i);
        if (sleeping) {
            if (s.sync_group.wait(done, std::chrono::seconds(5)) == 0) {
                die("a WRITE did not complete in 5 s");
            }
        } else {
            while (s.sync_group.poll(done) == 0) {
                std::this_thread::yield();
            }
        }
        if (!done[0].ok()) {
            die("a WRITE failed: " + done[0].failure->message);
        }
        ns.push_back(since(t0));
    }
    return ns;
}

std::vector<double> async(setup& s, rig::asio::group& a, rig::queue_pair& q, std::size_t n) {
    std::vector<double> ns;
    ns.reserve(n);
    bool finished = false;
    boost::asio::co_spawn(
        s.io,
        [&]() -> boost::asio::awaitable<void> {
            for (std::size_t i = 0; i < n; ++i) {
                const auto t0 = clk::now();
                rig::completion c =
                    co_await a.async_write(q, s.ra, 0, 64, s.rb.remote(0), boost::asio::use_awaitable);
                ns.push_back(since(t0));
                if (!c.ok()) {
                    die("a WRITE failed: " + c.failure->message);
                }
            }
            finished = true;
        },
        [](std::exception_ptr e) {
            if (e) {
                std::rethrow_exception(e);
            }
        });
    s.io.restart();
    s.io.run_for(std::chrono::seconds(120));
    if (!finished) {
        die("the async WRITEs did not finish in 120 s");
    }
    return ns;
}

void run(const std::string& family, const options& o) {
    rig::bench::served m(family, 2);
    setup s(m);
    struct row {
        const char* path;
        std::function<std::vector<double>(std::size_t)> measure;
    };
    const std::vector<row> rows = {
        {"sync: write + poll (own CQ)", [&](std::size_t n) { return sync_plain(s, n); }},
        {"sync: write + group poll", [&](std::size_t n) { return sync_group(s, n, false); }},
        {"sync: write + group wait, sleeping", [&](std::size_t n) { return sync_group(s, n, true); }},
        {"async_write use_awaitable, sleeping", [&](std::size_t n) { return async(s, s.sleeping, s.async_sleep, n); }},
        {"async_write use_awaitable, spinning", [&](std::size_t n) { return async(s, s.spinning, s.async_spin, n); }},
    };
    double base = 0;
    for (const row& r : rows) {
        r.measure(o.warmup);
        const figures f = summarize(r.measure(o.iterations));
        if (base == 0) {
            base = f.median_ns;
        }
        std::printf("  %-5s %-38s %9.0f %9.0f %7.2fx\n", family.c_str(), r.path, f.median_ns, f.p99_ns,
                    f.median_ns / base);
    }
}

}  // namespace

int main(int argc, char** argv) {
    rig::bench::program = "asio-bench";
    const options o = parse(argc, argv);
    std::printf("bench-asio: one 64-byte WRITE at a time, %zu after %zu warm-up (model, one in-process wire)\n",
                o.iterations, o.warmup);
    std::printf("  %-5s %-38s %9s %9s %8s\n", "", "path", "median ns", "p99 ns", "x sync");
    for (const std::string& family : o.families) {
        run(family, o);
    }
    return 0;
}
