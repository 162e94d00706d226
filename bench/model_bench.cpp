// bench-model: RDMA WRITE through the whole device model, as a program sees it. Two mlx5
// function models on one in-process wire, each served on its own vfio-user socket by this
// process, opened with the public API (rig::nic::open("vfio-user:..."), allocate, make_qp,
// connect). Prints figures, asserts nothing (issue 5, "Benchmarks"):
//  (a) 64-byte RDMA WRITE message rate, NIC 0 -> NIC 1: entries posted in batches (post_write
//      x N, one doorbell) keeping the send ring full, completions polled; with the CPU time of
//      each model thread (data path, firmware, vfio-user server: /proc/self/task/*/stat), so
//      "with one model core" can be read off;
//  (b) 64 KiB RDMA WRITE bandwidth next to single-core memcpy of 64 KiB blocks measured in the
//      same run, and their ratio;
//  (c) write latency between two processes: two children forked before any thread starts open
//      function 0 and function 1 of the model this process serves, swap endpoints over pipes
//      and ping-pong as perftest's ib_write_lat does (each writes 8 bytes into the peer's
//      buffer, then spins on its own for the peer's write). One-way latency = round trip / 2:
//      median, p99, p99.9, max.
// What the figures mean (reference/perftest-and-performance.md §0): the CPU cost of a software
// NIC on this host, never a card's wire or PCIe time.
//
//   meson compile -C build bench-model                 (about 20 s)
//   build/bench/model-bench [--quick] [--only rate|bandwidth|latency] [--seconds S] [--iters N]
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

#include "qp/endpoint.hpp"
#include "qp/nic.hpp"
#include "qp/qp.hpp"
#include "qp/region.hpp"
#include "sim/mlx5/datapath.hpp"
#include "sim/mlx5/function_model.hpp"
#include "sim/roce/wire.hpp"
#include "sim/vfio_user/server.hpp"

namespace {

using clk = std::chrono::steady_clock;
using namespace std::chrono_literals;

[[noreturn]] void die(const std::string& why) {
    std::fprintf(stderr, "model-bench: %s\n", why.c_str());
    std::fflush(stderr);
    std::_Exit(1);
}

template <class T>
T value(rig::result<T> r, const char* what) {
    if (!r) {
        die(std::string(what) + ": " + r.error().message);
    }
    return std::move(*r);
}
void ok(const rig::result<void>& r, const char* what) {
    if (!r) {
        die(std::string(what) + ": " + r.error().message);
    }
}

struct options {
    double seconds = 3.0;       // per throughput figure
    int iterations = 10000;     // latency round trips measured
    int warmup = 1000;
    std::string only;           // "", "rate", "bandwidth", "latency"
};

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                die(a + " needs a value");
            }
            return argv[++i];
        };
        if (a == "--quick") {
            o.seconds = 0.5;
            o.iterations = 2000;
            o.warmup = 200;
        } else if (a == "--only") {
            o.only = next();
            if (o.only != "rate" && o.only != "bandwidth" && o.only != "latency") {
                die("--only takes rate, bandwidth or latency, not " + o.only);
            }
        } else if (a == "--seconds") {
            o.seconds = std::atof(next().c_str());
        } else if (a == "--iters") {
            o.iterations = std::atoi(next().c_str());
        } else {
            die("unknown argument " + a + " (--quick, --only rate|bandwidth|latency, --seconds S, --iters N)");
        }
    }
    if (o.seconds <= 0 || o.iterations < 10) {
        die("--seconds must be > 0 and --iters at least 10");
    }
    return o;
}

// ---- the model, served by this process ------------------------------------------------------------

struct served {
    std::string dir;
    rig::sim::roce::wire wire;
    std::vector<std::unique_ptr<rig::sim::mlx5::function_model>> fns;
    std::vector<std::unique_ptr<rig::sim::vfio_user::server>> servers;

    explicit served(int functions) {
        char tmpl[] = "/tmp/rig-model-bench-XXXXXX";
        if (::mkdtemp(tmpl) == nullptr) {
            die("mkdtemp");
        }
        dir = tmpl;
        for (int k = 0; k < functions; ++k) {
            rig::sim::mlx5::function_options o;
            o.init_time = 1ms;
            o.function_index = static_cast<std::uint16_t>(k);
            fns.push_back(std::make_unique<rig::sim::mlx5::function_model>(o));
            auto s = rig::sim::vfio_user::server::create(socket(k), *fns.back());
            if (!s) {
                die("serving " + socket(k) + ": " + s.error());
            }
            servers.push_back(std::move(*s));
            fns.back()->attach(*servers.back());
            servers.back()->start();
            fns.back()->attach_wire(wire);
        }
    }
    ~served() {
        for (auto& s : servers) {
            s->stop();
        }
        servers.clear();
        fns.clear();
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
    // data-path passes of every function so far (datapath.hpp counters)
    std::uint64_t passes() const {
        std::uint64_t n = 0;
        for (const auto& f : fns) {
            n += f->data_path()->passes();
        }
        return n;
    }
    std::string socket(int k) const { return dir + "/mlx5-" + std::to_string(k) + ".sock"; }
    std::string where(int k) const { return "vfio-user:" + socket(k); }
};

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

// Prints the CPU share of every thread that used some during the window `[before, after]`;
// returns the CPU seconds of the model's threads (every thread but the caller's).
double print_cpu(const std::map<int, thread_cpu>& before, const std::map<int, thread_cpu>& after, double wall) {
    const int self = static_cast<int>(::gettid());
    double model = 0;
    std::string parts;
    for (const auto& [tid, t] : after) {
        const auto b = before.find(tid);
        const double used = t.seconds - (b != before.end() ? b->second.seconds : 0);
        if (used <= 0.005 * wall) {
            continue;
        }
        const bool bench = tid == self;
        if (!bench) {
            model += used;
        }
        char text[96];
        std::snprintf(text, sizeof text, "%s%s %.0f%%", parts.empty() ? "" : ", ", bench ? "bench (API)" : t.name.c_str(),
                      100 * used / wall);
        parts += text;
    }
    std::printf("    CPU: %s; model threads together %.2f cores (%u CPUs online)\n", parts.c_str(), model / wall,
                std::thread::hardware_concurrency());
    return model;
}

// ---- throughput: NIC 0 -> NIC 1 in this process --------------------------------------------------------

struct pair_of_nics {
    std::unique_ptr<rig::nic> a, b;
    rig::region ra, rb;
    rig::queue_pair qa, qb;

    pair_of_nics(const served& m, std::size_t bytes) {
        a = value(rig::nic::open(m.where(0)), "open NIC 0");
        b = value(rig::nic::open(m.where(1)), "open NIC 1");
        ra = value(a->allocate(bytes, rig::access::remote), "allocate on NIC 0");
        rb = value(b->allocate(bytes, rig::access::remote), "allocate on NIC 1");
        qa = value(a->make_qp(), "make_qp on NIC 0");
        qb = value(b->make_qp(), "make_qp on NIC 1");
        ok(qa.connect(qb.local()), "connect NIC 0's QP");
        ok(qb.connect(qa.local()), "connect NIC 1's QP");
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
// doorbell, the ring kept full; every completion taken and checked.
// Small messages cycle through 1 MiB (cache-warm, every page mapped by the warm-up run), large
// ones through half the region, as the memcpy they are compared with.
rate write_rate(pair_of_nics& p, std::size_t size, double seconds, std::uint32_t batch) {
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
            ++done;
            any = true;
        }
        if (!any && p.qa.room(rig::side::send) == 0) {
            ::sched_yield();
        }
    };
    const auto start = clk::now();
    const auto stop = start + std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(seconds));
    while (clk::now() < stop) {
        const std::uint32_t room = std::min(p.qa.room(rig::side::send), batch);
        if (room > 0) {
            for (std::uint32_t i = 0; i < room; ++i, ++posted) {
                const std::size_t at = (posted * size) % span;
                p.qa.post_write(p.ra, at, size, p.rb.remote(at));
            }
            p.qa.ring(rig::side::send);
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

void throughput(served& m, const options& o) {
    pair_of_nics p(m, 64 << 20);
    std::memset(p.ra.data(), 0x5a, p.ra.size());
    if (o.only.empty() || o.only == "rate") {
        write_rate(p, 64, o.seconds / 5, 256);   // warm-up: frame pool, caches
        const auto before = threads_cpu();
        const auto wire_before = counters_of(m);
        const rate r = write_rate(p, 64, o.seconds, 256);
        const auto after = threads_cpu();
        const auto wire_after = counters_of(m);
        std::printf("(a) 64 B RDMA WRITE, NIC 0 -> NIC 1, batches of 256 per doorbell, 4096-entry ring: %.3f M msg/s "
                    "(%.0f ns each)\n", r.messages_per_s / 1e6, 1e9 / r.messages_per_s);
        const double model_cpu = print_cpu(before, after, r.wall);
        print_wire(wire_before, wire_after, r.messages_per_s * r.wall);
        std::printf("    model CPU per message: %.0f ns (the model threads' CPU time over the messages: less "
                    "sensitive than the rate to a host with fewer free cores than busy threads)\n", 1e9 * model_cpu / (r.messages_per_s * r.wall));
        if (std::memcmp(p.ra.data(), p.rb.data(), 64) != 0) {
            die("the 64 B WRITEs did not land");
        }
    }
    if (o.only.empty() || o.only == "bandwidth") {
        constexpr std::size_t block = 64 << 10;
        write_rate(p, block, o.seconds / 5, 64);
        const auto before = threads_cpu();
        const auto wire_before = counters_of(m);
        const rate r = write_rate(p, block, o.seconds, 64);
        const auto after = threads_cpu();
        const auto wire_after = counters_of(m);
        const double bw = r.messages_per_s * block;
        const double mc = memcpy_rate(p.ra, block, o.seconds) * block;
        // the path MTU connect chose
        const auto q = p.qa.query();
        const unsigned mtu = q ? q->path_mtu : 0u;
        std::printf("(b) 64 KiB RDMA WRITE, path MTU %u: %.2f GB/s; single-core memcpy of 64 KiB blocks: %.2f GB/s; "
                    "ratio %.0f %%\n", mtu, bw / 1e9, mc / 1e9, 100 * bw / mc);
        const double model_cpu = print_cpu(before, after, r.wall);
        print_wire(wire_before, wire_after, r.messages_per_s * r.wall);
        std::printf("    model CPU per 64 KiB: %.1f us, i.e. %.2f GB/s per model core\n",
                    1e6 * model_cpu / (r.messages_per_s * r.wall), r.messages_per_s * r.wall * block / model_cpu / 1e9);
        if (std::memcmp(p.ra.data(), p.rb.data(), block) != 0) {
            die("the 64 KiB WRITEs did not land");
        }
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
    std::byte* out = r.data() + 64;
    const bool first = index == 0;
    const int total = o.warmup + o.iterations;
    std::vector<double> round_trip_ns;
    round_trip_ns.reserve(static_cast<std::size_t>(o.iterations));
    std::uint64_t completions_due = 0;
    const auto reap = [&] {
        while (completions_due > 0) {
            auto c = q.poll(rig::side::send);
            if (!c) {
                return;
            }
            if (!*c) {
                die("a latency WRITE failed: " + c->error().message);
            }
            --completions_due;
        }
    };
    const auto send = [&](std::uint64_t v) {
        while (q.room(rig::side::send) == 0) {
            reap();
        }
        std::memcpy(out, &v, sizeof v);
        q.write(r, 64, sizeof v, to);
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
            ::close(go[i].fd[1]);
            const int to_peer = i == 0 ? a_to_b.fd[1] : b_to_a.fd[1];
            const int from_peer = i == 0 ? b_to_a.fd[0] : a_to_b.fd[0];
            ping_pong(i, go[i].fd[0], to_peer, from_peer, result.fd[1], o);
        }
        ::close(go[i].fd[0]);
        k.go[i] = go[i].fd[1];
    }
    for (int fd : {a_to_b.fd[0], a_to_b.fd[1], b_to_a.fd[0], b_to_a.fd[1], result.fd[1]}) {
        ::close(fd);
    }
    k.result = result.fd[0];
    return k;
}

void latency(const served& m, latency_children& k) {
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
    std::printf("(c) 8 B RDMA WRITE ping-pong between two processes (model in a third): %s\n", line.c_str());
    print_cpu(before, after, wall);
}

}  // namespace

int main(int argc, char** argv) {
    const options o = parse(argc, argv);
    const bool want_latency = o.only.empty() || o.only == "latency";
    latency_children k;
    if (want_latency) {
        k = fork_latency_children(o);
    }
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    std::printf("bench-model: the device model (two mlx5 functions on one in-process wire) through the public API; "
                "figures are this host's CPU cost, not a NIC's\n");
    {
        served m(2);
        if (o.only != "latency") {
            throughput(m, o);
        }
        if (want_latency) {
            latency(m, k);
        }
    }
    return 0;
}
