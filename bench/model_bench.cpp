// bench-model: RDMA WRITE through the whole device model, as a program sees it. Two function
// models on one in-process wire, each served on its own vfio-user socket by this process,
// opened with the public API (rig::nic::open("vfio-user:..."), allocate, make_qp, connect).
// One block of figures per family (--family): mlx5 (two ConnectX functions), bnxt (two
// BCM57508 functions), mixed (function 0 mlx5, function 1 bnxt: RC across the families, the
// throughput figures in both directions); all (the default): the three in one run, then a
// summary table. Prints figures, asserts nothing (issue 5, "Benchmarks"); the targets are
// printed beside them: issue 5's (64 B WRITE >= 5 M msg/s on one model core; 64 KiB WRITE >= 50 %
// of single-core memcpy) and issue 17's (>= 10 M msg/s, i.e. <= 100 ns of model CPU a message;
// >= 85 % of memcpy; one-way latency median <= 1.0 us):
//  (a) 64-byte RDMA WRITE message rate, NIC 0 -> NIC 1: entries posted in batches (post_write
//      x N, one doorbell) keeping the send ring full, completions polled, every entry signalled
//      and then one in 100 (perftest's default CQ moderation, the form a NIC's message rate is
//      quoted in; bnxt's driver asks a CQE of each batch's last entry either way); with the CPU time of
//      each model thread (data path, firmware, vfio-user server: /proc/self/task/*/stat), so
//      "with one model core" can be read off;
//  (b) 64 KiB RDMA WRITE bandwidth next to single-core memcpy of 64 KiB blocks, in alternating
//      windows of each, and their ratio (the median of the window pairs');
//  (c) write latency between two processes: two children forked before any thread starts open
//      function 0 and function 1 of the model this process serves, swap endpoints over pipes
//      and ping-pong as perftest's ib_write_lat does (each writes 8 bytes into the peer's
//      buffer, inline as perftest's 8-byte WRITEs are, then spins on its own for the peer's
//      write). One-way latency = round trip / 2: median, p99, p99.9, max. Then the same
//      ping-pong driven by one thread of this process (both ends), which on a host with fewer
//      CPUs than the three busy threads above is the NIC path's latency without the scheduler's
//      switch in every trip, and the host's core-to-core cache-line time beside it.
// What the figures mean (README, "Quick start"): the CPU cost of a software
// NIC on this host, never a card's wire or PCIe time.
//
//   meson compile -C build bench-model                 (about 45 s: the three families, 2 cores)
//   build/bench/model-bench [--family mlx5|bnxt|mixed|all] [--quick] [--only rate|bandwidth|latency]
//                           [--seconds S] [--iters N]
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rig/endpoint.hpp"
#include "rig/nic.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"
#include "sim/bnxt/datapath.hpp"
#include "sim/bnxt/function_model.hpp"
#include "sim/mlx5/datapath.hpp"
#include "sim/mlx5/function_model.hpp"
#include "sim/roce/wire.hpp"
#include "sim/vfio_user/server.hpp"
#include "bench/bench_access.hpp"
#include "bench/served_models.hpp"

namespace {

using clk = std::chrono::steady_clock;
using namespace std::chrono_literals;

using rig::bench::die;
using rig::bench::ok;
using rig::bench::served;
using rig::bench::value;

struct options {
    double seconds = 3.0;       // per throughput figure
    int iterations = 10000;     // latency round trips measured
    int warmup = 1000;
    std::string only;           // "", "rate", "bandwidth", "latency"
    std::vector<std::string> families{"mlx5", "bnxt", "mixed"};   // --family
};

options parse(int argc, char** argv) {
    options o;
    for (rig::bench::arg_reader args(argc, argv); args.next();) {
        const std::string& a = args.flag();
        const auto next = [&] { return args.value(); };
        if (a == "--quick") {
            o.seconds = 0.5;
            o.iterations = 2000;
            o.warmup = 200;
        } else if (a == "--only") {
            o.only = next();
            if (o.only != "rate" && o.only != "bandwidth" && o.only != "latency") {
                die("--only takes rate, bandwidth or latency, not " + o.only);
            }
        } else if (a == "--family") {
            const std::string f = next();
            if (f == "all") {
                o.families = {"mlx5", "bnxt", "mixed"};
            } else if (f == "mlx5" || f == "bnxt" || f == "mixed") {
                o.families = {f};
            } else {
                die("--family takes mlx5, bnxt, mixed or all, not " + f);
            }
        } else if (a == "--seconds") {
            o.seconds = std::atof(next().c_str());
        } else if (a == "--iters") {
            o.iterations = std::atoi(next().c_str());
        } else {
            die("unknown argument " + a +
                " (--family mlx5|bnxt|mixed|all, --quick, --only rate|bandwidth|latency, --seconds S, --iters N)");
        }
    }
    if (o.seconds <= 0 || o.iterations < 10) {
        die("--seconds must be > 0 and --iters at least 10");
    }
    return o;
}

// CPU seconds (user + system) of each thread of this process, by thread id, with its name.
struct thread_cpu {
    std::string name;
    double seconds = 0;
};
std::map<int, thread_cpu> threads_cpu() {
    std::map<int, thread_cpu> out;
    const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/task", ec)) {
        std::ifstream f(e.path() / "stat");
        std::string line;
        std::getline(f, line);
        // pid (comm) state ppid ... : utime and stime are fields 14 and 15
        const auto open = line.find('('), close = line.rfind(')');
        if (open == std::string::npos || close == std::string::npos) {
            continue;
        }
        std::istringstream rest(line.substr(close + 2));
        std::string field;
        double utime = 0, stime = 0;
        for (int i = 3; i <= 15 && rest >> field; ++i) {
            if (i == 14) {
                utime = std::atof(field.c_str());
            } else if (i == 15) {
                stime = std::atof(field.c_str());
            }
        }
        out[std::atoi(e.path().filename().c_str())] = {line.substr(open + 1, close - open - 1), (utime + stime) / tick};
    }
    return out;
}

// The model's CPU seconds between two snapshots: every thread but the caller's.
double model_seconds(const std::map<int, thread_cpu>& before, const std::map<int, thread_cpu>& after) {
    const int self = static_cast<int>(::gettid());
    double used = 0;
    for (const auto& [tid, t] : after) {
        const auto b = before.find(tid);
        used += tid == self ? 0 : t.seconds - (b != before.end() ? b->second.seconds : 0);
    }
    return used;
}

// Prints the CPU share of every thread that used some during the window `[before, after]`;
// returns the CPU seconds of the model's threads (every thread but the caller's).
double print_cpu(const std::map<int, thread_cpu>& before, const std::map<int, thread_cpu>& after, double wall) {
    const int self = static_cast<int>(::gettid());
    const double model = model_seconds(before, after);
    std::string parts;
    for (const auto& [tid, t] : after) {
        const auto b = before.find(tid);
        const double used = t.seconds - (b != before.end() ? b->second.seconds : 0);
        if (used <= 0.005 * wall) {
            continue;
        }
        const bool bench = tid == self;
        char text[96];
        std::snprintf(text, sizeof text, "%s%s %.0f%%", parts.empty() ? "" : ", ", bench ? "bench (API)" : t.name.c_str(),
                      100 * used / wall);
        parts += text;
    }
    std::printf("    CPU: %s; model threads together %.2f cores (%u CPUs online)\n", parts.c_str(), model / wall,
                std::thread::hardware_concurrency());
    return model;
}

// ---- throughput: NIC `from` -> NIC `to` in this process -------------------------------------------------

struct pair_of_nics {
    std::unique_ptr<rig::nic> a, b;
    rig::region ra, rb;
    rig::queue_pair qa, qb;

    pair_of_nics(const served& m, std::size_t bytes, int from = 0, int to = 1) {
        a = value(rig::nic::open(m.where(from)), "open the sending NIC");
        b = value(rig::nic::open(m.where(to)), "open the receiving NIC");
        ra = value(a->allocate(bytes, rig::access::remote), "allocate on the sending NIC");
        rb = value(b->allocate(bytes, rig::access::remote), "allocate on the receiving NIC");
        qa = value(a->make_qp(), "make_qp on the sending NIC");
        qb = value(b->make_qp(), "make_qp on the receiving NIC");
        ok(qa.connect(qb.local()), "connect the sending NIC's QP");
        ok(qb.connect(qa.local()), "connect the receiving NIC's QP");
    }
    ~pair_of_nics() {
        (void)qa.destroy();
        (void)qb.destroy();
        (void)a->close();
        (void)b->close();
    }
};

struct rate {
    double messages_per_s;
    double wall;
};

// WRITEs of `size` bytes from ra to rb for `seconds`, in batches of up to `batch` entries per
// doorbell, the ring kept full; every completion taken and checked. One entry in `signal_every`
// is signalled (perftest's CQ moderation, -Q: its default is 100), the last of each group of
// `signal_every`; the run ends on a whole group, so that its last entry is signalled and every
// entry posted is known done.
// Small messages cycle through 1 MiB (cache-warm, every page mapped by the warm-up run), large
// ones through half the region, as the memcpy they are compared with.
rate write_rate(pair_of_nics& p, std::size_t size, double seconds, std::uint32_t batch,
                std::uint32_t signal_every = 1) {
    const std::size_t span = size < 4096 ? std::size_t{1} << 20 : p.ra.size() / 2;
    std::uint64_t posted = 0, done = 0;
    // With the ring full and nothing completed, give the core up: on a host with fewer cores
    // than this thread plus the model core (one thread for both functions), spinning here would measure
    // the scheduler, not the model. (With cores to spare nothing else is runnable and the
    // yield returns at once.)
    const auto drain = [&] {
        bool any = false;
        while (auto c = p.qa.poll(rig::side::send)) {
            if (!*c) {
                die("a WRITE failed: " + c->error().message);
            }
            done += signal_every;   // a signalled entry's success stands for its group's
            any = true;
        }
        if (!any && p.qa.room(rig::side::send) == 0) {
            ::sched_yield();
        }
    };
    const auto post = [&](std::uint32_t n) {
        for (std::uint32_t i = 0; i < n; ++i, ++posted) {
            const std::size_t at = (posted * size) % span;
            const bool last_of_group = posted % signal_every == signal_every - 1;
            p.qa.post_write(p.ra, at, size, p.rb.remote(at), 0, last_of_group ? rig::signaled::yes : rig::signaled::no);
        }
        p.qa.ring(rig::side::send);
    };
    const auto start = clk::now();
    const auto stop = start + std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(seconds));
    while (clk::now() < stop) {
        if (const std::uint32_t room = std::min(p.qa.room(rig::side::send), batch); room > 0) {
            post(room);
        }
        drain();
    }
    while (posted % signal_every != 0) {   // the last group made whole
        const auto rest = static_cast<std::uint32_t>(signal_every - posted % signal_every);
        if (const std::uint32_t room = std::min(p.qa.room(rig::side::send), rest); room > 0) {
            post(room);
        }
        drain();
    }
    while (done < posted) {   // what is in flight completes (not counted in the rate)
        drain();
    }
    const double wall = std::chrono::duration<double>(clk::now() - start).count();
    return {static_cast<double>(done) / wall, wall};
}

double memcpy_rate(const rig::region& r, std::size_t size, double seconds) {
    std::byte* base = r.data();
    const std::size_t span = r.size() / 2;
    std::uint64_t n = 0;
    const auto start = clk::now();
    const auto stop = start + std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(seconds));
    while (clk::now() < stop) {
        for (int i = 0; i < 64; ++i, ++n) {
            const std::size_t at = (n * size) % span;
            std::memcpy(base + span + at, base + at, size);
        }
    }
    return static_cast<double>(n) / std::chrono::duration<double>(clk::now() - start).count();
}

struct model_counters {
    rig::sim::roce::wire_counters wire;
    std::uint64_t passes;
};
model_counters counters_of(const served& m) { return {m.wire.counters(), m.passes()}; }

// Frames the wire carried during a figure and data-path passes, per message, and what was lost.
void print_wire(const model_counters& before, const model_counters& after, double messages) {
    std::printf("    wire: %.2f frames per message, %llu dropped, %llu overflowed; data-path passes per message: %.3f\n",
                static_cast<double>(after.wire.transmitted - before.wire.transmitted) / messages,
                static_cast<unsigned long long>(after.wire.dropped - before.wire.dropped),
                static_cast<unsigned long long>(after.wire.overflow - before.wire.overflow),
                static_cast<double>(after.passes - before.passes) / messages);
}

// One block's figures, for the summary at the end (negative: not measured).
struct rate_figures {
    double rate = -1, cores = -1, cpu_ns = -1;
};
struct figures {
    std::string name;
    rate_figures rate, rate_moderated;   // every entry signalled; one in perftest_cq_mod
    double bw = -1, memcpy_bw = -1, bw_ratio = -1;   // the ratio: the median of window pairs
    double latency_us = -1;       // between two processes
    double latency_one_us = -1;   // one thread driving both ends
};

const char* verdict(bool met) { return met ? "met" : "NOT met"; }

// (b): 64 KiB WRITEs and single-core memcpy of 64 KiB blocks in alternating windows, five of
// each, the ratio taken window pair by window pair: this host's speed drifts within minutes
// (memcpy measured 8.7-28 GB/s from one run to the next), and a memcpy measured once, apart
// from the WRITEs, made the ratio follow the drift (a run printed 146 %). The figures are the
// medians of the five.
void bandwidth(served& m, pair_of_nics& p, const options& o, const std::string& dir, figures& f) {
    constexpr std::size_t block = 64 << 10;
    constexpr int windows = 5;
    write_rate(p, block, o.seconds / 5, 64);   // warm-up
    std::vector<double> bws, memcpys, ratios;
    double model_cpu = 0, messages = 0;
    const auto wire_before = counters_of(m);
    for (int w = 0; w < windows; ++w) {
        const auto before = threads_cpu();
        const rate r = write_rate(p, block, o.seconds / windows, 64);
        model_cpu += model_seconds(before, threads_cpu());
        messages += r.messages_per_s * r.wall;
        const double mc = memcpy_rate(p.ra, block, o.seconds / windows) * block;
        bws.push_back(r.messages_per_s * block);
        memcpys.push_back(mc);
        ratios.push_back(r.messages_per_s * block / mc);
    }
    const auto wire_after = counters_of(m);
    const double bw = rig::bench::median(bws), mc = rig::bench::median(memcpys), ratio = rig::bench::median(ratios);
    const auto q = p.qa.query();   // the path MTU connect chose
    const unsigned mtu = q ? q->path_mtu : 0u;
    std::printf("(b) 64 KiB RDMA WRITE, %s, path MTU %u: %.2f GB/s; single-core memcpy of 64 KiB blocks: %.2f GB/s; "
                "ratio %.0f %% (medians of %d alternating windows of each; ratios %.0f-%.0f %%)\n",
                dir.c_str(), mtu, bw / 1e9, mc / 1e9, 100 * ratio, windows,
                100 * *std::min_element(ratios.begin(), ratios.end()),
                100 * *std::max_element(ratios.begin(), ratios.end()));
    print_wire(wire_before, wire_after, messages);
    std::printf("    model CPU per 64 KiB: %.1f us, i.e. %.2f GB/s per model core\n", 1e6 * model_cpu / messages,
                messages * block / model_cpu / 1e9);
    std::printf("    target: >= 50 %% of single-core memcpy (issue 5): %.0f %%: %s; >= 85 %% (issue 17): %s\n",
                100 * ratio, verdict(ratio >= 0.5), verdict(ratio >= 0.85));
    if (std::memcmp(p.ra.data(), p.rb.data(), block) != 0) {
        die("the 64 KiB WRITEs did not land");
    }
    if (f.bw < 0) {
        f.bw = bw;
        f.memcpy_bw = mc;
        f.bw_ratio = ratio;
    }
}

// perftest's default CQ moderation for the bandwidth tests (perftest_parameters.h DEF_CQ_MOD): the
// form in which a NIC's message rate is quoted.
constexpr std::uint32_t perftest_cq_mod = 100;

// (a): 64 B WRITEs for `seconds`, one entry in `signal_every` signalled; its figures into `out`
// (the first block's only).
void message_rate(served& m, pair_of_nics& p, double seconds, const std::string& dir, std::uint32_t signal_every,
                  rate_figures& out) {
    const std::uint32_t ring = p.qa.room(rig::side::send);
    const auto before = threads_cpu();
    const auto wire_before = counters_of(m);
    const rate r = write_rate(p, 64, seconds, 256, signal_every);
    const auto after = threads_cpu();
    const auto wire_after = counters_of(m);
    const std::string signalled = signal_every == 1 ? std::string("every entry signalled")
                                                    : "one entry in " + std::to_string(signal_every) + " signalled" +
                                                          (signal_every == perftest_cq_mod ? " (perftest's default -Q)" : "");
    std::printf("(a) 64 B RDMA WRITE, %s, batches of 256 per doorbell, %u-entry ring, %s: %.3f M msg/s "
                "(%.0f ns each)\n", dir.c_str(), ring, signalled.c_str(), r.messages_per_s / 1e6, 1e9 / r.messages_per_s);
    const double model_cpu = print_cpu(before, after, r.wall);
    print_wire(wire_before, wire_after, r.messages_per_s * r.wall);
    const double cpu_ns = 1e9 * model_cpu / (r.messages_per_s * r.wall);
    std::printf("    model CPU per message: %.0f ns (the model threads' CPU time over the messages: less "
                "sensitive than the rate to a host with fewer free cores than busy threads)\n", cpu_ns);
    const double cores = model_cpu / r.wall;
    std::printf("    target: >= 5 M msg/s on one model core (issue 5): %.3f M msg/s with the model on %.2f cores "
                "(%.2f M msg/s per model core by its CPU time): %s; >= 10 M (issue 17): %s\n",
                r.messages_per_s / 1e6, cores, 1e3 / cpu_ns, verdict(r.messages_per_s >= 5e6 && cores <= 1.05),
                verdict(r.messages_per_s >= 10e6 && cores <= 1.05));
    if (out.rate < 0) {
        out = {r.messages_per_s, cores, cpu_ns};
    }
}

// (a) and (b) from function `from` to function `to`; `tag` names the direction in the figures.
void throughput(served& m, const options& o, int from, int to, figures& f) {
    pair_of_nics p(m, 64 << 20, from, to);
    std::memset(p.ra.data(), 0x5a, p.ra.size());
    const std::string dir = "NIC " + std::to_string(from) + " (" + m.family_of(from) + ") -> NIC " + std::to_string(to) +
                            " (" + m.family_of(to) + ")";
    if (o.only.empty() || o.only == "rate") {
        write_rate(p, 64, o.seconds / 5, 256);   // warm-up: frame pool, caches
        message_rate(m, p, o.seconds / 2, dir, 1, f.rate);
        message_rate(m, p, o.seconds / 2, dir, perftest_cq_mod, f.rate_moderated);
        if (std::memcmp(p.ra.data(), p.rb.data(), 64) != 0) {
            die("the 64 B WRITEs did not land");
        }
    }
    if (o.only.empty() || o.only == "bandwidth") {
        bandwidth(m, p, o, dir, f);
    }
}

// ---- latency: two processes -----------------------------------------------------------------------------

// Pipes: parent -> child (go), child -> peer (endpoint), child -> parent (result).
struct channel {
    int fd[2];
    channel() {
        if (::pipe(fd) != 0) {
            die("pipe");
        }
    }
};

void put_line(int fd, const std::string& s) {
    const std::string line = s + "\n";
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
        die("pipe write");
    }
}
std::string get_line(int fd) {
    std::string s;
    char c;
    while (::read(fd, &c, 1) == 1 && c != '\n') {
        s += c;
    }
    return s;
}

// The latency WRITEs' completions that are in: `due` counts down by them; a failed one ends the bench.
void reap_writes(rig::queue_pair& q, std::uint64_t& due) {
    while (due > 0) {
        auto c = q.poll(rig::side::send);
        if (!c) {
            return;
        }
        if (!*c) {
            die("a latency WRITE failed: " + c->error().message);
        }
        --due;
    }
}

// One side of the ping-pong (perftest write_lat): `first` writes first. The 8-byte message is
// the iteration number + 1, so each side knows which write it waits for.
void ping_pong(int index, int go, int to_peer, int from_peer, int result, const options& o) {
    const std::string where = get_line(go);
    if (where.empty()) {
        std::_Exit(0);   // the parent gave up before starting
    }
    auto n = value(rig::nic::open(where), "open (latency child)");
    rig::region r = value(n->allocate(4096, rig::access::remote), "allocate (latency child)");
    rig::queue_pair q = value(n->make_qp(), "make_qp (latency child)");
    put_line(to_peer, q.local().to_string());
    put_line(to_peer, std::to_string(r.address()) + " " + std::to_string(r.key()));
    const std::string text = get_line(from_peer);
    std::istringstream peer(get_line(from_peer));
    rig::remote to;
    peer >> to.address >> to.key;
    const auto e = rig::endpoint::parse(text);
    if (!e) {
        die("peer endpoint: " + e.error());
    }
    ok(q.connect(*e), "connect (latency child)");
    put_line(to_peer, "ready");
    if (get_line(from_peer) != "ready") {
        die("peer not ready");
    }
    auto* mine = reinterpret_cast<volatile std::uint64_t*>(r.data());
    const bool first = index == 0;
    const int total = o.warmup + o.iterations;
    std::vector<double> round_trip_ns;
    round_trip_ns.reserve(static_cast<std::size_t>(o.iterations));
    std::uint64_t completions_due = 0;
    const auto reap = [&] { reap_writes(q, completions_due); };
    const auto send = [&](std::uint64_t v) {
        while (q.room(rig::side::send) == 0) {
            reap();
        }
        q.write_inline(std::as_bytes(std::span(&v, 1)), to);
        ++completions_due;
    };
    const auto await = [&](std::uint64_t v) {
        for (std::uint64_t spins = 0; *mine != v; ++spins) {
            reap();
            if (spins % 64 == 63) {
                ::sched_yield();   // on a host with fewer cores than busy threads, let the model run
            }
        }
    };
    for (int i = 0; i < total; ++i) {
        const auto v = static_cast<std::uint64_t>(i) + 1;
        const auto t0 = clk::now();
        if (first) {
            send(v);
            await(v);
        } else {
            await(v);
            send(v);
        }
        if (first && i >= o.warmup) {
            round_trip_ns.push_back(std::chrono::duration<double, std::nano>(clk::now() - t0).count());
        }
    }
    while (completions_due > 0) {
        reap();
    }
    if (first) {
        std::sort(round_trip_ns.begin(), round_trip_ns.end());
        const auto at = [&](double p) {
            const auto k = static_cast<std::size_t>(p * static_cast<double>(round_trip_ns.size() - 1));
            return round_trip_ns[k] / 2 / 1000;   // one way, µs
        };
        char summary[256];
        std::snprintf(summary, sizeof summary, "%d iterations: one-way median %.2f us, p99 %.2f us, p99.9 %.2f us, max %.2f us",
                      o.iterations, at(0.5), at(0.99), at(0.999), round_trip_ns.back() / 2 / 1000);
        put_line(result, summary);
    }
    put_line(to_peer, "done");
    (void)get_line(from_peer);
    (void)q.destroy();
    (void)n->close();
    std::_Exit(0);
}

struct latency_children {
    pid_t pid[2] = {-1, -1};
    int go[2] = {-1, -1};
    int result = -1;
};

// The pipe ends this process keeps for the children forked so far: a later child closes its
// copies, so each pipe's end is where it belongs (an end of file when its owner goes).
std::vector<int> parent_fds;

// Forked before any thread of this process exists, so each child is a plain single-threaded copy.
latency_children fork_latency_children(const options& o) {
    latency_children k;
    channel go[2], a_to_b, b_to_a, result;
    for (int i = 0; i < 2; ++i) {
        k.pid[i] = ::fork();
        if (k.pid[i] < 0) {
            die("fork");
        }
        if (k.pid[i] == 0) {
            for (int fd : parent_fds) {
                ::close(fd);
            }
            ::close(go[i].fd[1]);
            ::close(result.fd[0]);
            const int to_peer = i == 0 ? a_to_b.fd[1] : b_to_a.fd[1];
            const int from_peer = i == 0 ? b_to_a.fd[0] : a_to_b.fd[0];
            ping_pong(i, go[i].fd[0], to_peer, from_peer, result.fd[1], o);
        }
        ::close(go[i].fd[0]);
        k.go[i] = go[i].fd[1];
        parent_fds.push_back(k.go[i]);
    }
    for (int fd : {a_to_b.fd[0], a_to_b.fd[1], b_to_a.fd[0], b_to_a.fd[1], result.fd[1]}) {
        ::close(fd);
    }
    k.result = result.fd[0];
    parent_fds.push_back(k.result);
    return k;
}

// The block's latency figure (function 0's child writes first); the median one-way latency in µs.
double latency(const served& m, latency_children& k) {
    const auto before = threads_cpu();
    const auto start = clk::now();
    for (int i = 0; i < 2; ++i) {
        put_line(k.go[i], m.where(i));
    }
    const std::string line = get_line(k.result);
    const double wall = std::chrono::duration<double>(clk::now() - start).count();
    const auto after = threads_cpu();
    for (int i = 0; i < 2; ++i) {
        int status = 0;
        ::waitpid(k.pid[i], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            die("latency child " + std::to_string(i) + " failed");
        }
    }
    if (line.empty()) {
        die("latency: no result");
    }
    std::printf("(c) 8 B RDMA WRITE ping-pong between two processes on NIC 0 (%s) and NIC 1 (%s), model in a "
                "third: %s\n", m.family_of(0).c_str(), m.family_of(1).c_str(), line.c_str());
    print_cpu(before, after, wall);
    double median = -1;
    if (const auto at = line.find("median "); at != std::string::npos) {
        median = std::atof(line.c_str() + at + 7);
    }
    // Three busy threads (two children spinning, the model core); with fewer CPUs than that,
    // each one-way trip waits for the scheduler to switch, whatever the model costs.
    std::printf("    target: one-way median <= 1.0 us (issue 17): %s (%ld CPUs online for 3 busy threads)\n",
                verdict(median >= 0 && median <= 1.0), ::sysconf(_SC_NPROCESSORS_ONLN));
    return median;
}

// A cache line's trip from one core to another on this host: two threads hand a counter back
// and forth (`trips` round trips); ns one way. The floor under each hop of a WRITE's trip (the
// doorbell seen, the entry and its record read, the landing seen), whatever the model costs:
// 75-85 ns or 290-365 ns on this project's 2-vCPU VM, by where the host placed its vCPUs.
double line_transfer_ns(int trips) {
    alignas(64) std::atomic<int> ping{0};
    alignas(64) std::atomic<int> pong{0};
    std::thread other([&] {
        for (int i = 1; i <= trips; ++i) {
            while (ping.load(std::memory_order_acquire) != i) {
            }
            pong.store(i, std::memory_order_release);
        }
    });
    const auto start = clk::now();
    for (int i = 1; i <= trips; ++i) {
        ping.store(i, std::memory_order_release);
        while (pong.load(std::memory_order_acquire) != i) {
        }
    }
    const double ns = std::chrono::duration<double, std::nano>(clk::now() - start).count();
    other.join();
    return ns / trips / 2;
}

// (c) without the processes: one thread drives both ends of the ping-pong (writes NIC 0 -> 1, spins
// until it lands, writes back 1 -> 0, spins), so only this thread and the model core are busy.
// What is left of a one-way trip is the driver's post and doorbell, the model's pass over the
// send queue, the wire, the responder's placement and the poll that sees it: the NIC path without
// a process switch in it, the figure the two-process one approaches with a CPU for each of its
// three busy threads. The median one-way latency in µs.
double latency_one_thread(const served& m, const options& o) {
    pair_of_nics p(m, 4096);
    auto* at_b = reinterpret_cast<volatile std::uint64_t*>(p.rb.data());
    auto* at_a = reinterpret_cast<volatile std::uint64_t*>(p.ra.data());
    std::uint64_t due_a = 0, due_b = 0;
    const auto trip = [&](rig::queue_pair& q, const rig::region& to, volatile std::uint64_t* lands, std::uint64_t& due,
                          std::uint64_t v) {
        while (q.room(rig::side::send) == 0) {
            reap_writes(q, due);
        }
        q.write_inline(std::as_bytes(std::span(&v, 1)), to.remote(0));
        ++due;
        while (*lands != v) {
        }
    };
    std::vector<double> one_way_ns;
    one_way_ns.reserve(static_cast<std::size_t>(2 * o.iterations));
    for (int i = 0; i < o.warmup + o.iterations; ++i) {
        const auto v = static_cast<std::uint64_t>(i) + 1;
        const auto t0 = clk::now();
        trip(p.qa, p.rb, at_b, due_a, v);
        const auto t1 = clk::now();
        trip(p.qb, p.ra, at_a, due_b, v);
        const auto t2 = clk::now();
        reap_writes(p.qa, due_a);
        reap_writes(p.qb, due_b);
        if (i >= o.warmup) {
            one_way_ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
            one_way_ns.push_back(std::chrono::duration<double, std::nano>(t2 - t1).count());
        }
    }
    while (due_a > 0 || due_b > 0) {
        reap_writes(p.qa, due_a);
        reap_writes(p.qb, due_b);
    }
    std::sort(one_way_ns.begin(), one_way_ns.end());
    const auto at = [&](double q) {
        return one_way_ns[static_cast<std::size_t>(q * static_cast<double>(one_way_ns.size() - 1))] / 1000;
    };
    std::printf("(c) the same ping-pong driven by one thread of this process, no process switch in a trip: %d "
                "iterations: one-way median %.2f us, p99 %.2f us, p99.9 %.2f us, max %.2f us\n",
                o.iterations, at(0.5), at(0.99), at(0.999), one_way_ns.back() / 1000);
    std::printf("    host: a cache line moves between two cores in %.0f ns (a trip has at least three such hops "
                "in a row: the doorbell, the entry, the landing)\n", line_transfer_ns(200000));
    std::printf("    target: one-way median <= 1.0 us (issue 17), without the process switch: %s\n",
                verdict(at(0.5) <= 1.0));
    return at(0.5);
}

std::string describe(const std::string& family) {
    if (family == "mlx5") {
        return "two mlx5 functions (ConnectX-6 Dx)";
    }
    if (family == "bnxt") {
        return "two bnxt functions (BCM57508)";
    }
    return "function 0 mlx5 (ConnectX-6 Dx), function 1 bnxt (BCM57508): RC across the families";
}

void print_summary(const std::vector<figures>& all) {
    const auto num = [](double v, const char* fmt) {
        if (v < 0) {
            return std::string("-");
        }
        char b[32];
        std::snprintf(b, sizeof b, fmt, v);
        return std::string(b);
    };
    std::printf("\nsummary (targets: 64 B WRITE >= 5 M msg/s on one model core, issue 17 >= 10 M; 64 KiB WRITE >= "
                "50 %% of memcpy, issue 17 >= 85 %%; issue 17: latency median <= 1.0 us; Q100: one entry in 100 "
                "signalled, perftest's default)\n");
    std::printf("  %-18s %12s %12s %11s %12s %11s %12s %12s %7s %14s %14s\n", "family", "64B M msg/s", "model cores",
                "ns CPU/msg", "Q100 M msg/s", "Q100 ns/msg", "64KiB GB/s", "memcpy GB/s", "ratio", "lat median us",
                "1-thread lat");
    for (const figures& f : all) {
        std::printf("  %-18s %12s %12s %11s %12s %11s %12s %12s %7s %14s %14s\n", f.name.c_str(),
                    num(f.rate.rate / 1e6, "%.3f").c_str(), num(f.rate.cores, "%.2f").c_str(),
                    num(f.rate.cpu_ns, "%.0f").c_str(), num(f.rate_moderated.rate / 1e6, "%.3f").c_str(),
                    num(f.rate_moderated.cpu_ns, "%.0f").c_str(), num(f.bw / 1e9, "%.2f").c_str(),
                    num(f.memcpy_bw / 1e9, "%.2f").c_str(),
                    f.bw_ratio < 0 ? "-" : num(100 * f.bw_ratio, "%.0f%%").c_str(),
                    num(f.latency_us, "%.2f").c_str(), num(f.latency_one_us, "%.2f").c_str());
    }
}

}  // namespace

int main(int argc, char** argv) {
    rig::bench::program = "model-bench";
    const options o = parse(argc, argv);
    const bool want_latency = o.only.empty() || o.only == "latency";
    // every block's latency children, forked before any thread starts
    std::vector<latency_children> children(o.families.size());
    if (want_latency) {
        for (auto& k : children) {
            k = fork_latency_children(o);
        }
    }
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    std::printf("bench-model: the device model (two functions on one in-process wire) through the public API, "
                "family by family; figures are this host's CPU cost, not a NIC's\n");
    std::vector<figures> all;
    for (std::size_t b = 0; b < o.families.size(); ++b) {
        const std::string& family = o.families[b];
        std::printf("\n== family %s: %s ==\n", family.c_str(), describe(family).c_str());
        figures f, reverse;
        f.name = family == "mixed" ? "mixed mlx5->bnxt" : family;
        reverse.name = "mixed bnxt->mlx5";
        {
            served m(family, 2);
            if (o.only != "latency") {
                throughput(m, o, 0, 1, f);
                if (family == "mixed") {   // and the other way: bnxt sending to mlx5
                    throughput(m, o, 1, 0, reverse);
                }
            }
            if (want_latency) {
                f.latency_us = reverse.latency_us = latency(m, children[b]);
                f.latency_one_us = reverse.latency_one_us = latency_one_thread(m, o);
            }
        }
        all.push_back(f);
        if (family == "mixed" && o.only != "latency") {
            all.push_back(reverse);
        }
    }
    print_summary(all);
    return 0;
}
