// bench-scale: how the driver and the device model scale with queue pairs (issue 17, "Scale
// curves" and "Memory"). For each family (--family mlx5|bnxt, both by default, one after the
// other) two function models of it are served by this process on one in-process wire
// (served_models.hpp, as bench-group), opened through the public API, and for N = 1, 4, 16, 64,
// 256, 1024 (--qps) N connected queue-pair pairs are made, NIC 0's to NIC 1's:
//  rate     64-byte WRITEs on all N queue pairs for --seconds, a fixed number in flight per queue
//           pair (--depth), completions drained from a completion group: M msg/s and the ratio to
//           N = 1 (the aim: >= 80 % at 1024);
//  latency  with the same N open, one 64-byte WRITE ping-pong at a time, queue pairs taken in round
//           robin (so the NIC's state for all N is live): median and p99 of the round trip / 2;
//  memory   the process's RSS and heap before and after making the N pairs, per queue pair (2N of
//           them: N on each NIC), beside what can be counted: the driver's DMA rings (entries x
//           stride, page-rounded as the driver maps them) and the model's per-queue-pair RC state
//           (sim/roce rc_qp and its per-entry shadow rings).
// A table per family, --out_json FILE with the same rows, --plot FILE.svg|png with rig-perf's
// plot code. Prints figures, asserts nothing. A queue pair that stops completing ends the bench
// with an error naming it (--stall S), never a hang.
//
//   meson compile -C build bench-scale
//   build/bench/scale-bench [--family mlx5|bnxt] [--qps 1,4,16] [--seconds S] [--ring N] [--depth D]
//                           [--pings N] [--stall S] [--out_json FILE] [--plot FILE.svg|png]
#include <malloc.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bench/served_models.hpp"
#include "qp/bnxt/control.hpp"
#include "qp/mlx5/control.hpp"
#include "rig/group.hpp"
#include "rig/nic.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"
#include "sim/bnxt/datapath.hpp"
#include "sim/mlx5/datapath.hpp"
#include "sim/roce/engine.hpp"
#include "sim/roce/rc_qp.hpp"
#include "sim/roce/work.hpp"
#include "tools/rig-perf/plot.hpp"
#include "tools/rig-perf/plot_layout.hpp"

namespace {

using clk = std::chrono::steady_clock;
using rig::bench::die;
using rig::bench::ok;
using rig::bench::value;

// Rings of 256 entries with 192 WRITEs in flight per queue pair: the smallest that keep the pipe
// full with one queue pair, which the ratio to N = 1 needs. The model sends at most 128 packets
// of a queue pair a pass (rc_qp::burst) and completes them a pass or two later, so one queue
// pair must have more than a burst in flight to keep it busy: measured on mlx5 with 1 queue
// pair, a 64-entry ring (63 in flight) gave about 3.3 M msg/s, 256 entries with 128 in flight
// about 4.0, 192 about 4.4, 255 about 5 (several queue pairs reach that with 64-entry rings). 192
// leaves a quarter of the ring for the next batch while the model works (bnxt keeps one entry
// free). --ring and --depth change them; the memory counted below scales with the ring.
constexpr std::size_t message = 64;
constexpr std::size_t slot_area = 1024 * message;   // latency: one 64-byte slot per queue pair
constexpr std::size_t rate_area = 256 << 10;        // rate: WRITEs cycle above this offset
constexpr std::size_t region_bytes = 1 << 20;

struct options {
    std::vector<std::string> families{"mlx5", "bnxt"};
    std::vector<std::size_t> qps{1, 4, 16, 64, 256, 1024};
    double seconds = 1.0;     // the rate's window
    std::uint8_t log_ring = 8;   // 2^n entries a ring (--ring N: a power of two)
    std::uint32_t depth = 192;   // WRITEs in flight per queue pair
    std::uint32_t ring() const { return 1u << log_ring; }
    int repeat = 3;           // rate windows; the median is printed (a shared 2-core host is noisy)
    int pings = 2000;         // latency round trips measured (after pings / 10 of warm-up)
    double stall = 10;        // seconds without progress that end the bench
    std::string json, plot;
};

std::vector<std::size_t> parse_list(const std::string& s) {
    std::vector<std::size_t> out;
    for (std::size_t at = 0; at <= s.size();) {
        const std::size_t comma = std::min(s.find(',', at), s.size());
        const std::size_t n = std::strtoull(s.substr(at, comma - at).c_str(), nullptr, 10);
        if (n == 0 || n > 1024) {
            die("--qps takes a list of counts 1..1024 (1,4,16), not " + s);
        }
        out.push_back(n);
        at = comma + 1;
    }
    return out;
}

options parse(int argc, char** argv) {
    options o;
    for (rig::bench::arg_reader args(argc, argv); args.next();) {
        const std::string& a = args.flag();
        const auto next = [&] { return args.value(); };
        if (a == "--family") {
            const std::string f = next();
            o.families = f == "both" ? std::vector<std::string>{"mlx5", "bnxt"} : std::vector<std::string>{f};
        } else if (a == "--qps") {
            o.qps = parse_list(next());
        } else if (a == "--seconds") {
            o.seconds = std::atof(next().c_str());
        } else if (a == "--ring") {
            const auto n = static_cast<std::uint32_t>(std::atoi(next().c_str()));
            if (n < 2 || n > 4096 || (n & (n - 1)) != 0) {
                die("--ring takes a power of two 2..4096");
            }
            o.log_ring = static_cast<std::uint8_t>(std::countr_zero(n));
        } else if (a == "--depth") {
            o.depth = static_cast<std::uint32_t>(std::atoi(next().c_str()));
        } else if (a == "--repeat") {
            o.repeat = std::atoi(next().c_str());
        } else if (a == "--pings") {
            o.pings = std::atoi(next().c_str());
        } else if (a == "--stall") {
            o.stall = std::atof(next().c_str());
        } else if (a == "--out_json") {
            o.json = next();
        } else if (a == "--plot") {
            o.plot = next();
        } else {
            die("unknown option " + a + " (--family mlx5|bnxt|both, --qps LIST, --seconds S, --repeat R, --ring N, "
                "--depth D, --pings N, --stall S, --out_json FILE, --plot FILE.svg|png)");
        }
    }
    for (const auto& f : o.families) {
        if (f != "mlx5" && f != "bnxt") {
            die("--family takes mlx5, bnxt or both, not " + f);
        }
    }
    if (o.seconds <= 0 || o.depth == 0 || o.depth >= o.ring() || o.pings < 10 || o.stall <= 0 || o.repeat < 1) {
        die("--seconds and --stall > 0, --depth 1.." + std::to_string(o.ring() - 1) +
            ", --pings at least 10, --repeat at least 1");
    }
    if (!o.plot.empty()) {
        if (auto f = rig::perf::plot_format_of(o.plot); !f) {
            die("--plot " + o.plot + ": " + f.error());
        }
    }
    return o;
}

// ---- memory -------------------------------------------------------------------------------------

// Resident bytes of the process (/proc/self/statm's second field, in pages).
std::size_t rss_bytes() {
    std::ifstream f("/proc/self/statm");
    std::size_t size = 0, resident = 0;
    f >> size >> resident;
    return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

// Heap bytes in use, every arena (the model's threads allocate in arenas of their own).
std::size_t heap_bytes() {
    const struct mallinfo2 m = ::mallinfo2();
    return m.uordblks + m.hblkhd;
}

// The model's RC state per queue pair, as sim/roce/rc_qp.hpp lays it out: the rc_qp itself,
// its send queue's shadow entries with their payload store, its receive entries with their
// scatter lists and its two completion rings. The rings are the ones the family's data path
// makes (rc_rings, which mlx5 datapath.cpp / bnxt datapath.cpp configure use) of the queue
// pair the driver asks for: `ring` entries each way, receives of the driver's stride or SGEs.
struct model_bytes {
    std::uint32_t ring;
    std::size_t rc_qp;
    rig::sim::roce::rc_qp::entry_bytes entry;
    std::size_t send_shadow() const { return ring * entry.send; }
    std::size_t total() const { return rc_qp + ring * (entry.send + entry.receive + 2 * entry.completion); }
};
model_bytes model_bytes_of(const std::string& family, std::uint32_t ring) {
    const auto log_ring = static_cast<std::uint8_t>(std::countr_zero(ring));
    const rig::sim::roce::qp_config c =
        family == "bnxt" ? rig::sim::bnxt::rc_rings(ring, ring, rig::qp::bnxt::wqe_sges)
                         : rig::sim::mlx5::rc_rings(log_ring, log_ring, rig::qp::mlx5::receive_stride_log);
    return {ring, sizeof(rig::sim::roce::rc_qp), rig::sim::roce::rc_qp::bytes_per_entry(c)};
}

std::size_t pages(std::size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

// The driver's DMA memory per queue pair of a group, from its rings' entries x stride, rounded as
// firmware/ maps it (mapped_memory: whole 4 KiB pages), with its share of the group's CQ (two
// rings' entries). mlx5 (firmware/mlx5 qp::create): receive 32-byte strides, send 64-byte
// WQEBBs, the doorbell record a 64-byte slot of a shared page (firmware/mlx5/doorbell_records.hpp);
// CQE 64 bytes. bnxt (firmware/bnxt
// queue_pair.cpp, objects.cpp paged): send 128-byte WQE + 16-byte PSN search entry, receive
// 32 + 16 x 6 SGEs, each ring with one page-table page past one page; CQE 32 bytes.
std::size_t driver_bytes(const std::string& family, std::uint32_t ring) {
    if (family == "mlx5") {
        return pages(ring * 32 + ring * 64) + 64 + 2 * ring * 64;
    }
    const auto paged = [](std::size_t bytes) { return pages(bytes) + (bytes > 4096 ? 4096 : 0); };
    return paged(ring * (128 + 16)) + paged(ring * (32 + 16 * 6)) + 2 * ring * 32;
}

// ---- the queue pairs ----------------------------------------------------------------------------

// Two NICs, one completion group each, N queue pairs of NIC 0 connected to N of NIC 1. A group on
// each side, not per-queue-pair polls: a poll of 1024 queue pairs' CQs would cost the bench
// 1024 looks a pass whatever completed, so the curve would weigh the bench's sweep, not the
// driver's and the model's state; the group's one CQ costs a look per completion, and it spares
// the driver two CQs per queue pair (memory).
struct pairs {
    std::unique_ptr<rig::nic> a, b;
    rig::region ra, rb;
    rig::completion_group ga, gb;
    std::vector<rig::queue_pair> qa, qb;
    std::size_t rss0 = 0, heap0 = 0;   // before the groups and queue pairs were made

    pairs(const rig::bench::served& m, std::size_t n, std::uint8_t log_ring) {
        rig::nic_options no;
        no.log_ring_entries = log_ring;
        a = value(rig::nic::open(m.where(0), no), "open NIC 0");
        b = value(rig::nic::open(m.where(1), no), "open NIC 1");
        ra = value(a->allocate(region_bytes, rig::access::remote), "allocate on NIC 0");
        rb = value(b->allocate(region_bytes, rig::access::remote), "allocate on NIC 1");
        // every page of the regions resident before the baseline: the WRITEs touch them later
        std::memset(ra.data(), 0, ra.size());
        std::memset(rb.data(), 0, rb.size());
        ::malloc_trim(0);   // what an earlier N freed goes back, so it is not reused unseen
        rss0 = rss_bytes();
        heap0 = heap_bytes();
        const auto entries = static_cast<std::uint32_t>(n * 2) << log_ring;
        ga = value(a->make_group({.entries = entries, .log_ring_entries = log_ring}), "make_group on NIC 0");
        gb = value(b->make_group({.entries = entries, .log_ring_entries = log_ring}), "make_group on NIC 1");
        for (std::size_t i = 0; i < n; ++i) {
            qa.push_back(value(a->make_qp(ga), "make_qp on NIC 0"));
            qb.push_back(value(b->make_qp(gb), "make_qp on NIC 1"));
            ok(qa.back().connect(qb.back().local()), "connect on NIC 0");
            ok(qb.back().connect(qa.back().local()), "connect on NIC 1");
        }
    }
    ~pairs() {
        for (auto* side : {&qa, &qb}) {
            for (auto& q : *side) {
                static_cast<void>(q.destroy());
            }
        }
        static_cast<void>(ga.destroy());
        static_cast<void>(gb.destroy());
        static_cast<void>(a->close());
        static_cast<void>(b->close());
    }
    pairs(const pairs&) = delete;
    pairs& operator=(const pairs&) = delete;

    std::string name(std::size_t i) const {
        char text[96];
        std::snprintf(text, sizeof text, "queue pair %zu (NIC 0 qpn %#x -> NIC 1 qpn %#x)", i, qa[i].number(),
                      qb[i].number());
        return text;
    }
};

// Takes what group `g` has; `each(tag)` per completion. A failed entry ends the bench.
template <class Each>
std::size_t reap(rig::completion_group& g, std::span<rig::completion> buf, const char* what, Each each) {
    const std::size_t n = g.poll(buf);
    for (std::size_t k = 0; k < n; ++k) {
        if (!buf[k].ok()) {
            die(std::string(what) + ": a WRITE of qpn " + std::to_string(buf[k].qp) + " failed: " +
                buf[k].failure->message);
        }
        each(buf[k].tag);
    }
    return n;
}

// ---- rate ---------------------------------------------------------------------------------------

// Tops queue pair i up to `depth` WRITEs in flight, one doorbell for the batch; tag = i.
void top_up(pairs& p, std::size_t i, std::uint32_t depth, std::vector<std::uint32_t>& in_flight,
            std::uint64_t& posted) {
    const std::uint32_t want = depth - in_flight[i];
    for (std::uint32_t k = 0; k < want; ++k, ++posted) {
        const std::size_t at = rate_area + (posted * message) % (region_bytes - rate_area);
        p.qa[i].post_write(p.ra, at, message, p.rb.remote(at), i);
    }
    p.qa[i].ring(rig::side::send);
    in_flight[i] = depth;
}

struct window {
    double rate = 0;            // messages per second
    std::uint64_t messages = 0; // completed, the drain's included
};

// WRITEs on every queue pair for `seconds`, then what is in flight completes: messages per
// second. Only queue pairs that completed something are topped up, so the bench's cost per pass
// follows the completions, not N.
window write_rate(pairs& p, double seconds, std::uint32_t depth, double stall) {
    const std::size_t n = p.qa.size();
    std::vector<std::uint32_t> in_flight(n, 0);
    std::vector<std::size_t> due;   // queue pairs with completions since their last top-up
    std::vector<char> marked(n, 0);
    std::vector<rig::completion> buf(256);
    std::uint64_t posted = 0, done = 0;
    for (std::size_t i = 0; i < n; ++i) {
        top_up(p, i, depth, in_flight, posted);
    }
    const auto start = clk::now();
    const auto stop = start + std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(seconds));
    auto last = start;
    for (;;) {
        const auto now = clk::now();
        const bool open = now < stop;   // closed: what is in flight completes, nothing more is posted
        const std::size_t got = reap(p.ga, buf, "rate", [&](std::uint64_t i) {
            --in_flight[i];
            if (!marked[i]) {
                marked[i] = 1;
                due.push_back(i);
            }
        });
        done += got;
        if (got > 0) {
            last = now;
        } else if (std::chrono::duration<double>(now - last).count() > stall) {
            const auto it = std::find_if(in_flight.begin(), in_flight.end(), [](std::uint32_t f) { return f > 0; });
            die("rate: no completion in " + std::to_string(stall) + " s; " +
                p.name(static_cast<std::size_t>(it - in_flight.begin())) + " has " + std::to_string(*it) +
                " WRITEs in flight");
        } else {
            ::sched_yield();   // 2 cores: let the model's threads run rather than spin
        }
        for (const std::size_t i : due) {
            marked[i] = 0;
            if (open) {
                top_up(p, i, depth, in_flight, posted);
            }
        }
        due.clear();
        if (!open && done >= posted) {
            return {static_cast<double>(done) / std::chrono::duration<double>(now - start).count(), done};
        }
    }
}

// ---- latency ------------------------------------------------------------------------------------

// Spins until the 8 bytes at `at` read `v`, reaping both groups (their rings need the room);
// the deadline names the queue pair.
void await(pairs& p, const rig::region& r, std::size_t at, std::uint64_t v, std::size_t i, double stall,
           std::span<rig::completion> buf) {
    std::atomic_ref<std::uint64_t> word(*reinterpret_cast<std::uint64_t*>(r.data() + at));
    const auto limit = clk::now() + std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(stall));
    for (std::uint64_t spins = 0; word.load(std::memory_order_acquire) != v; ++spins) {
        if (spins % 64 == 63) {
            reap(p.ga, buf, "latency", [](std::uint64_t) {});
            reap(p.gb, buf, "latency", [](std::uint64_t) {});
            if (clk::now() > limit) {
                die("latency: " + p.name(i) + " did not deliver its WRITE within " + std::to_string(stall) + " s");
            }
            ::sched_yield();
        }
    }
}

struct latency {
    double median_us = 0, p99_us = 0;
};

// One WRITE ping-pong at a time, queue pair i = k mod N: NIC 0 writes k+1 into NIC 1's slot i,
// NIC 1 sees it and writes it back into NIC 0's slot i. One way = round trip / 2.
latency ping_pong(pairs& p, int pings, double stall) {
    const std::size_t n = p.qa.size();
    const int warmup = pings / 10;
    std::vector<rig::completion> buf(256);
    std::vector<double> us;
    us.reserve(static_cast<std::size_t>(pings));
    for (int k = 0; k < warmup + pings; ++k) {
        const std::size_t i = static_cast<std::size_t>(k) % n, slot = i * message;
        const std::uint64_t v = static_cast<std::uint64_t>(k) + 1 + (std::uint64_t{1} << 40);
        std::memcpy(p.ra.data() + slot_area + slot, &v, sizeof v);   // what NIC 0 sends
        const auto t0 = clk::now();
        p.qa[i].write(p.ra, slot_area + slot, message, p.rb.remote(slot), i);
        await(p, p.rb, slot, v, i, stall, buf);
        std::memcpy(p.rb.data() + slot_area + slot, &v, sizeof v);
        p.qb[i].write(p.rb, slot_area + slot, message, p.ra.remote(slot), i);
        await(p, p.ra, slot, v, i, stall, buf);
        if (k >= warmup) {
            us.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count() / 2);
        }
    }
    // what is still due completes before the queue pairs go
    const auto limit = clk::now() + std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(stall));
    while (reap(p.ga, buf, "latency", [](std::uint64_t) {}) + reap(p.gb, buf, "latency", [](std::uint64_t) {}) > 0) {
        if (clk::now() > limit) {
            die("latency: completions did not stop coming within " + std::to_string(stall) + " s");
        }
    }
    std::sort(us.begin(), us.end());
    return {us[us.size() / 2], us[static_cast<std::size_t>(0.99 * static_cast<double>(us.size() - 1))]};
}

// ---- the table ----------------------------------------------------------------------------------

struct row {
    std::string family;
    std::size_t qps = 0;
    double rate = 0, ratio = 0, median_us = 0, p99_us = 0;
    double rss_per_qp = 0, heap_per_qp = 0, driver_per_qp = 0, model_per_qp = 0;
    // the model during the rate windows: wall time per data-path pass (the model core runs every
    // function's passes in turn: wall / passes), messages per pass (a pass takes at most
    // roce::engine::receive_burst frames in: with a pass's cost growing with N, that bounds the
    // rate), frames lost on the wire
    double pass_us = 0, msgs_per_pass = 0;
    std::uint64_t lost = 0;
};

// The median rate of `repeat` windows, with the model's passes and wire counters over all of them.
void rate_windows(const rig::bench::served& m, pairs& p, const options& o, row& r) {
    const auto wire0 = m.wire.counters();
    const std::uint64_t passes0 = m.passes();
    const auto t0 = clk::now();
    std::vector<double> rates;
    double messages = 0;
    for (int k = 0; k < o.repeat; ++k) {
        const window w = write_rate(p, o.seconds, o.depth, o.stall);
        rates.push_back(w.rate);
        messages += static_cast<double>(w.messages);
    }
    const double wall = std::chrono::duration<double>(clk::now() - t0).count();
    const auto wire1 = m.wire.counters();
    const std::uint64_t passes = m.passes() - passes0;
    std::sort(rates.begin(), rates.end());
    r.rate = rates[rates.size() / 2];
    r.pass_us = passes > 0 ? 1e6 * wall / static_cast<double>(passes) : 0;
    r.msgs_per_pass = messages / std::max<double>(static_cast<double>(passes), 1);
    r.lost = (wire1.dropped - wire0.dropped) + (wire1.overflow - wire0.overflow);
}

row measure(const rig::bench::served& m, const std::string& family, std::size_t n, const options& o) {
    pairs p(m, n, o.log_ring);
    row r;
    r.family = family;
    r.qps = n;
    write_rate(p, o.seconds / 5, o.depth, o.stall);   // warm-up: frame pool, caches, every page touched
    // Memory once every queue pair has carried traffic: the model makes its RC state on its own
    // thread after the firmware's MODIFY_QP has answered, so right after connect() some is not there yet.
    const double qps = static_cast<double>(2 * n);
    r.rss_per_qp = static_cast<double>(rss_bytes() - std::min(rss_bytes(), p.rss0)) / qps;
    r.heap_per_qp = static_cast<double>(heap_bytes() - std::min(heap_bytes(), p.heap0)) / qps;
    r.driver_per_qp = static_cast<double>(driver_bytes(family, o.ring()));
    r.model_per_qp = static_cast<double>(model_bytes_of(family, o.ring()).total());
    rate_windows(m, p, o, r);
    const latency l = ping_pong(p, o.pings, o.stall);
    r.median_us = l.median_us;
    r.p99_us = l.p99_us;
    return r;
}

void print_header(const std::string& family, const options& o) {
    const std::uint32_t ring = o.ring();
    const model_bytes mb = model_bytes_of(family, ring);
    std::printf("\n== %s: two functions on one wire; %u-entry rings, %u WRITEs of %zu B in flight per queue pair, "
                "%.1f s per rate ==\n", family.c_str(), ring, o.depth, message, o.seconds);
    std::printf("   counted per queue pair: driver DMA %zu B (rings + its share of the group CQ); model RC state %zu B "
                "= rc_qp %zu + %u x send_entry %zu (shadow %zu) + %u x receive_entry %zu + %u x completion %zu\n",
                driver_bytes(family, ring), mb.total(), mb.rc_qp, ring, mb.entry.send, mb.send_shadow(), ring,
                mb.entry.receive, 2 * ring, mb.entry.completion);
    std::printf("   rate: the median of %d windows; B/QP: the process's growth over 2N queue pairs (RSS; heap: every "
                "arena);\n   us/pass, msg/pass: wall time and messages per data-path pass of a function during the "
                "rate (a pass takes at most %d frames in)\n", o.repeat, rig::sim::roce::engine::receive_burst);
    std::printf("   %6s %9s %7s %10s %10s %10s %10s %10s %10s %6s\n", "QPs", "M msg/s", "x 1 QP", "median us",
                "p99 us", "RSS B/QP", "heap B/QP", "us/pass", "msg/pass", "lost");
}

void print_row(const row& r) {
    std::printf("   %6zu %9.3f %6.0f%% %10.2f %10.2f %10.0f %10.0f %10.2f %10.2f %6llu\n", r.qps, r.rate / 1e6,
                100 * r.ratio, r.median_us, r.p99_us, r.rss_per_qp, r.heap_per_qp, r.pass_us, r.msgs_per_pass,
                static_cast<unsigned long long>(r.lost));
    std::fflush(stdout);
}

// The last row's memory taken apart: what the heap holds beside the model's counted RC state, and
// the RSS beside heap and the driver's DMA rings. In this one process the rings are mapped twice,
// by the driver and by the model's vfio-user server (the DMA region's file), and RSS counts both.
void print_memory(const row& r, const options& o) {
    const model_bytes mb = model_bytes_of(r.family, o.ring());
    const double other = r.rss_per_qp - r.heap_per_qp - 2 * r.driver_per_qp;
    std::printf("   memory per queue pair at %zu: RSS %.0f B = heap %.0f (model RC state counted %.0f, of which the "
                "send shadow %zu = %u x %zu B; the rest %.0f: the driver's and the firmware model's objects) + 2 x "
                "driver DMA %.0f + other %.0f\n", r.qps, r.rss_per_qp, r.heap_per_qp, r.model_per_qp, mb.send_shadow(),
                o.ring(), mb.entry.send, r.heap_per_qp - r.model_per_qp, r.driver_per_qp, other);
    std::printf("   rate with %zu queue pairs: %.0f %% of the rate with %zu (issue 17 aims at >= 80 %%)\n", r.qps,
                100 * r.ratio, o.qps.front());
}

void write_json(const std::string& path, const std::vector<row>& rows, std::uint32_t ring) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
        die("--out_json: cannot write " + path);
    }
    std::fprintf(f, "{\n  \"bench\": \"scale\",\n  \"ring_entries\": %u,\n  \"message_bytes\": %zu,\n  \"rows\": [",
                 ring, message);
    for (std::size_t k = 0; k < rows.size(); ++k) {
        const row& r = rows[k];
        std::fprintf(f, "%s\n    {\"family\": \"%s\", \"qps\": %zu, \"rate_mmsg_s\": %.4f, \"ratio_to_1\": %.4f, "
                     "\"median_us\": %.3f, \"p99_us\": %.3f, \"rss_bytes_per_qp\": %.0f, \"heap_bytes_per_qp\": %.0f, "
                     "\"driver_dma_bytes_per_qp\": %.0f, \"model_rc_bytes_per_qp\": %.0f, \"model_us_per_pass\": %.3f, "
                     "\"messages_per_pass\": %.3f, \"frames_lost\": %llu}",
                     k == 0 ? "" : ",", r.family.c_str(), r.qps, r.rate / 1e6, r.ratio, r.median_us, r.p99_us,
                     r.rss_per_qp, r.heap_per_qp, r.driver_per_qp, r.model_per_qp, r.pass_us, r.msgs_per_pass,
                     static_cast<unsigned long long>(r.lost));
    }
    std::fprintf(f, "\n  ]\n}\n");
    if (std::fclose(f) != 0) {
        die("--out_json: cannot write " + path);
    }
}

// Rate per family on the left axis, median latency on the right, against queue pairs (the p99 is
// in the table: on the same linear axis it would flatten the medians; and a legend of six
// entries would not fit the canvas's width).
void write_plot(const std::string& path, const std::vector<row>& rows, const std::vector<std::string>& families) {
    static constexpr std::uint32_t colours[][2] = {{0x1f77b4, 0x2ca02c}, {0xd62728, 0xff7f0e}};
    std::vector<double> xs;
    std::vector<rig::perf::plot::curve> curves;
    for (std::size_t f = 0; f < families.size(); ++f) {
        rig::perf::plot::curve rate{families[f] + " rate [M msg/s]", colours[f % 2][0], false, {}};
        rig::perf::plot::curve med{families[f] + " median [us]", colours[f % 2][1], true, {}};
        std::vector<double> x;
        for (const row& r : rows) {
            if (r.family == families[f]) {
                x.push_back(static_cast<double>(r.qps));
                rate.values.push_back(r.rate / 1e6);
                med.values.push_back(r.median_us);
            }
        }
        xs = x;   // every family runs the same --qps list
        curves.insert(curves.end(), {rate, med});
    }
    auto d = rig::perf::plot::layout_of_curves("bench-scale: 64 B WRITE rate and latency against queue pairs",
                                                "queue pairs [log2 scale]", xs, curves, "rate [M msg/s]",
                                                "median one-way latency [usec] (dashed)");
    if (!d) {
        die(d.error());
    }
    if (auto w = rig::perf::write_layout(path, *d); !w) {
        die(w.error());
    }
}

}  // namespace

int main(int argc, char** argv) {
    rig::bench::program = "scale-bench";
    const options o = parse(argc, argv);
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    std::printf("bench-scale: 64 B WRITE rate, latency and memory against queue pairs, the device model through the "
                "public API (figures are this host's CPU cost, not a NIC's; B/QP over 2N queue pairs, N per NIC)\n");
    std::vector<row> rows;
    for (const std::string& family : o.families) {
        rig::bench::served m(family, 2);
        print_header(family, o);
        double base = 0;
        for (const std::size_t n : o.qps) {
            row r = measure(m, family, n, o);
            base = base > 0 ? base : r.rate;
            r.ratio = r.rate / base;
            print_row(r);
            rows.push_back(r);
        }
        print_memory(rows.back(), o);
    }
    if (!o.json.empty()) {
        write_json(o.json, rows, o.ring());
    }
    if (!o.plot.empty()) {
        write_plot(o.plot, rows, o.families);
        std::printf("plot: %s\n", o.plot.c_str());
    }
    return 0;
}
