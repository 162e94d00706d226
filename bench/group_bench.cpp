// bench-group: draining a completion group (rig/group.hpp) in batches against polling each queue
// pair on its own (queue_pair::poll), on two function models of one family (--family mlx5|bnxt,
// mlx5 by default) on one in-process wire, served by this process and opened through the public
// API. Prints figures, asserts nothing.
//
//  (a) the drain alone: every queue pair posts its WRITEs (64 B, one doorbell each), the model
//      writes every CQE, and only then is the drain timed: ns per completion for the group
//      polled with spans of 1, 16 and 64, and for the per-queue-pair poll over every queue pair;
//  (b) streaming: the same WRITEs round after round, posting and draining as they come:
//      completions per second each way (the model core's rate bounds both).
//
//   meson compile -C build bench-group
//   build/bench/group-bench [--family mlx5|bnxt] [--qps N] [--per-qp K] [--rounds R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bench/bench_access.hpp"
#include "bench/served_models.hpp"
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
    std::string family = "mlx5";
    std::size_t qps = 64;
    std::size_t per_qp = 128;   // WRITEs per queue pair and round (its ring holds 256; bnxt keeps one free)
    std::size_t rounds = 15;
};

options parse(int argc, char** argv) {
    options o;
    for (rig::bench::arg_reader args(argc, argv); args.next();) {
        const std::string& a = args.flag();
        const auto number = [&] { return static_cast<std::size_t>(std::strtoull(args.value().c_str(), nullptr, 10)); };
        if (a == "--family") {
            o.family = args.value();
        } else if (a == "--qps") {
            o.qps = number();
        } else if (a == "--per-qp") {
            o.per_qp = number();
        } else if (a == "--rounds") {
            o.rounds = number();
        } else {
            die("unknown option " + a + " (--family mlx5|bnxt, --qps N, --per-qp K, --rounds R)");
        }
    }
    if (o.qps == 0 || o.per_qp == 0 || o.per_qp > 255 || o.rounds == 0 || (o.family != "mlx5" && o.family != "bnxt")) {
        die("--family mlx5 or bnxt, --qps and --rounds at least 1, --per-qp 1..255");
    }
    return o;
}

constexpr std::uint8_t log_ring = 8;

// Queue pairs of NIC 0 (in a group, or each on its own CQs) connected to plain ones of NIC 1.
struct setup {
    std::unique_ptr<rig::nic> a, b;
    rig::region ra, rb;
    rig::completion_group group;
    std::vector<rig::queue_pair> qa, qb;

    setup(const rig::bench::served& m, const options& o, bool grouped) {
        rig::nic_options n;
        n.log_ring_entries = log_ring;
        a = value(rig::nic::open(m.where(0), n), "open NIC 0");
        b = value(rig::nic::open(m.where(1), n), "open NIC 1");
        ra = value(a->allocate(1 << 20, rig::access::remote), "allocate on NIC 0");
        rb = value(b->allocate(1 << 20, rig::access::remote), "allocate on NIC 1");
        if (grouped) {
            const auto entries = static_cast<std::uint32_t>(o.qps * (2u << log_ring));
            group = value(a->make_group({.entries = entries, .log_ring_entries = log_ring}), "make_group");
        }
        for (std::size_t i = 0; i < o.qps; ++i) {
            qa.push_back(value(grouped ? a->make_qp(group) : a->make_qp(), "make_qp on NIC 0"));
            qb.push_back(value(b->make_qp(), "make_qp on NIC 1"));
            ok(qa.back().connect(qb.back().local()), "connect");
            ok(qb.back().connect(qa.back().local()), "connect");
        }
    }
    ~setup() {
        for (auto& q : qa) {
            static_cast<void>(q.destroy());
        }
        if (!group.destroyed()) {
            static_cast<void>(group.destroy());
        }
        static_cast<void>(a->close());
        static_cast<void>(b->close());
    }

    void post_round(const options& o) {
        for (std::size_t i = 0; i < o.qps; ++i) {
            for (std::size_t k = 0; k < o.per_qp; ++k) {
                const std::size_t at = ((i * o.per_qp + k) * 64) % (1 << 20);
                qa[i].post_write(ra, at, 64, rb.remote(at), k);
            }
            qa[i].ring(rig::side::send);
        }
    }
};

// Takes every completion of a round: the group with spans of `batch`, or each queue pair's poll.
std::size_t drain(setup& s, std::size_t want, std::size_t batch, std::vector<rig::completion>& buf) {
    std::size_t got = 0;
    if (batch > 0) {
        const std::span<rig::completion> span(buf.data(), batch);
        while (got < want) {
            const std::size_t n = s.group.poll(span);
            for (std::size_t i = 0; i < n; ++i) {
                if (!span[i].ok()) {
                    die("a WRITE failed: " + span[i].failure->message);
                }
            }
            got += n;
        }
        return got;
    }
    while (got < want) {
        for (auto& q : s.qa) {
            while (auto r = q.poll(rig::side::send)) {
                if (!*r) {
                    die("a WRITE failed: " + r->error().message);
                }
                ++got;
            }
        }
    }
    return got;
}

using rig::bench::median;

// (a): ns per completion of the drain alone, the model done writing before the clock starts.
double drain_cost(rig::bench::served& m, setup& s, const options& o, std::size_t batch) {
    std::vector<rig::completion> buf(std::max<std::size_t>(batch, 1));
    const std::size_t want = o.qps * o.per_qp;
    // mlx5: a CQE per entry (every entry signalled); bnxt: one per doorbell, the batch's last
    // entry's, completing the batch (CQE aggregation, docs/bnxt-data-path.md).
    const std::size_t cqes = o.family == "mlx5" ? want : o.qps;
    std::vector<double> per;
    for (std::size_t r = 0; r < o.rounds; ++r) {
        const std::uint64_t before = m.cqes_written(0);
        s.post_round(o);
        const auto limit = clk::now() + std::chrono::seconds(10);
        while (m.cqes_written(0) < before + cqes) {
            if (clk::now() > limit) {
                die("the model wrote " + std::to_string(m.cqes_written(0) - before) + " of " + std::to_string(cqes) +
                    " CQEs in 10 s");
            }
        }
        const auto t0 = clk::now();
        drain(s, want, batch, buf);
        per.push_back(std::chrono::duration<double, std::nano>(clk::now() - t0).count() / static_cast<double>(want));
    }
    return median(per);
}

// (b): completions per second with posting and draining interleaved.
double streaming_rate(setup& s, const options& o, std::size_t batch) {
    std::vector<rig::completion> buf(std::max<std::size_t>(batch, 1));
    const std::size_t want = o.qps * o.per_qp;
    const auto t0 = clk::now();
    for (std::size_t r = 0; r < o.rounds; ++r) {
        s.post_round(o);
        drain(s, want, batch, buf);
    }
    const double seconds = std::chrono::duration<double>(clk::now() - t0).count();
    return static_cast<double>(want * o.rounds) / seconds;
}

}  // namespace

int main(int argc, char** argv) {
    rig::bench::program = "group-bench";
    const options o = parse(argc, argv);
    rig::bench::served m(o.family, 2);
    std::printf("bench-group: %zu queue pairs x %zu 64-byte WRITEs per round, %zu rounds (%s model)\n", o.qps,
                o.per_qp, o.rounds, o.family.c_str());
    double per_qp_ns = 0, per_qp_rate = 0;
    {
        setup s(m, o, false);
        per_qp_ns = drain_cost(m, s, o, 0);
        per_qp_rate = streaming_rate(s, o, 0);
    }
    std::printf("  %-36s %8.1f ns/completion   %6.2f M completions/s streaming\n", "per-queue-pair poll", per_qp_ns,
                per_qp_rate / 1e6);
    setup s(m, o, true);
    for (const std::size_t batch : {std::size_t{1}, std::size_t{16}, std::size_t{64}}) {
        const double ns = drain_cost(m, s, o, batch);
        const double rate = streaming_rate(s, o, batch);
        const std::string label = "group poll, spans of " + std::to_string(batch);
        std::printf("  %-36s %8.1f ns/completion   %6.2f M completions/s streaming   drain %.2fx the per-QP poll\n",
                    label.c_str(), ns, rate / 1e6, ns / per_qp_ns);
    }
    return 0;
}
