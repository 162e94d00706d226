// rig-perf's command line (options.hpp). Defaults from perftest's perftest_parameters.h
// (DEF_PORT, DEF_SIZE_BW, DEF_SIZE_LAT, DEF_ITERS ...): port 18515, size 65536 (BW) / 2 (LAT),
// iters 5000 (write_bw) / 1000, tx depth 128 (BW) / 1 (LAT), MIN_ITER 5, -a up to 2^23.
#include "tools/rig-perf/options.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cstdint>
#include <limits>

#include <arpa/inet.h>

#include "tools/rig-perf/args.hpp"
#include "tools/rig-perf/plot.hpp"

namespace rig::perf {

namespace {

// The largest message (rig/qp.hpp: n over 2^31 is misuse; mlx5 writes 2^31 as two segments).
constexpr std::uint64_t max_message = 1ull << 31;
// A queue pair's ring holds 2^12 entries (nic_options::log_ring_entries).
constexpr std::uint64_t max_depth = 4096;
// perftest's MAX_QP_NUM (perftest_parameters.h); past what the NIC allows, make_qp says so.
constexpr std::uint64_t max_queue_pairs = 16384;
// The most inline bytes any NIC Rig drives takes (bnxt static WQEs: 96; mlx5: 28); the queue
// pair's own limit (queue_pair::max_inline) is checked once it exists (runner.cpp).
constexpr std::uint64_t max_inline = 96;
// perftest_parameters.h: MIN_CQ_MOD .. MAX_CQ_MOD, DEF_CQ_MOD, and MSG_SIZE_CQ_MOD_LIMIT (above
// it a single size runs every entry signalled unless -Q is given).
constexpr std::uint32_t min_cq_mod = 1, max_cq_mod = 1024, default_cq_mod = 100;
constexpr std::uint64_t cq_mod_size_limit = 8192;
// Each measured entry keeps two timestamps (16 bytes): bound the arrays to 1.6 GB.
constexpr std::uint64_t max_iterations = 100'000'000;

// An unsigned decimal (or 0x hexadecimal) number in [lo, hi], or why not.
std::expected<std::uint64_t, std::string> number(const std::string& flag, const std::string& text, std::uint64_t lo,
                                                 std::uint64_t hi) {
    std::uint64_t v = 0;
    const char* b = text.data();
    const char* e = text.data() + text.size();
    int base = 10;
    if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
        b += 2;
        base = 16;
    }
    auto [p, ec] = std::from_chars(b, e, v, base);
    if (text.empty() || ec != std::errc{} || p != e) {
        return std::unexpected(flag + " " + (text.empty() ? "''" : text) + ": not a number");
    }
    if (v < lo || v > hi) {
        return std::unexpected(flag + " " + text + ": out of range " + std::to_string(lo) + ".." + std::to_string(hi));
    }
    return v;
}

struct given {
    bool size = false, iterations = false, tx_depth = false, duration = false, queue_pairs = false,
         inline_size = false, max_size = false, sim_family = false, cq_mod = false;
};

// perftest's CQ moderation (perftest_parameters.c force_dependecies): 100 unless -Q says; a
// single size over 8 KiB without -Q signals every entry (-a keeps it: its sizes share one
// setting); never more than -t, or the ring would fill with entries no completion frees.
// Latency tests signal every entry.
void cq_moderation(options& o, bool given) {
    if (is_latency(o.kind)) {
        o.cq_mod = 1;
        return;
    }
    if (!given) {
        o.cq_mod = !o.all_sizes && o.size > cq_mod_size_limit ? 1 : default_cq_mod;
    }
    o.cq_mod = std::min(o.cq_mod, o.tx_depth);
}

}  // namespace

std::expected<test_kind, std::string> parse_test(std::string_view name) {
    constexpr std::array<test_kind, 6> all{test_kind::write_bw, test_kind::write_lat, test_kind::read_bw,
                                           test_kind::read_lat, test_kind::send_bw,   test_kind::send_lat};
    for (test_kind k : all) {
        if (test_name(k) == name) {
            return k;
        }
    }
    return std::unexpected("unknown test '" + std::string(name) +
                           "' (write_bw, write_lat, read_bw, read_lat, send_bw, send_lat)");
}

std::string_view test_name(test_kind k) noexcept {
    switch (k) {
    case test_kind::write_bw: return "write_bw";
    case test_kind::write_lat: return "write_lat";
    case test_kind::read_bw: return "read_bw";
    case test_kind::read_lat: return "read_lat";
    case test_kind::send_bw: return "send_bw";
    case test_kind::send_lat: return "send_lat";
    }
    return "unknown";
}

std::expected<options, std::string> parse_options(const std::vector<std::string>& args) {
    options o;
    given g;
    std::vector<std::string> positional;

    for (const token& t : scan(args)) {
        if (!t.error.empty()) {
            return std::unexpected(t.error);
        }
        if (t.f == nullptr) {
            positional.push_back(*t.value);
            continue;
        }
        if (t.f->id == opt::none) {
            return std::unexpected("not supported: " + t.spelled() + " (" + std::string(t.f->refusal) + ")");
        }
        const std::string flag = t.spelled();
        const std::string v = t.value.value_or("");  // getopt_long gave an argument iff the option takes one
        auto numeric = [&](std::uint64_t lo, std::uint64_t hi) { return number(flag, v, lo, hi); };

#define RIG_PERF_TRY(var, expr)                       \
    auto var = (expr);                                \
    if (!var) {                                       \
        return std::unexpected(std::move(var.error())); \
    }

        switch (t.f->id) {
        case opt::help: o.help = true; break;
        case opt::ib_dev:
            if (v.empty()) {
                return std::unexpected(flag + " '': names no device (a PCI address or vfio-user:PATH)");
            }
            o.device = v;
            break;
        case opt::size: {
            RIG_PERF_TRY(n, numeric(1, max_message));
            o.size = *n;
            g.size = true;
            break;
        }
        case opt::all: o.all_sizes = true; break;
        case opt::iters: {
            RIG_PERF_TRY(n, numeric(5, max_iterations));
            o.iterations = *n;
            g.iterations = true;
            break;
        }
        case opt::duration: {
            RIG_PERF_TRY(n, numeric(1, 3600));
            o.duration = std::chrono::seconds(*n);
            g.duration = true;
            break;
        }
        case opt::qp: {
            // perftest's range (MAX_QP_NUM); the NIC's own limit shows when make_qp is refused
            RIG_PERF_TRY(n, numeric(1, max_queue_pairs));
            o.queue_pairs = static_cast<std::uint32_t>(*n);
            g.queue_pairs = true;
            break;
        }
        case opt::tx_depth: {
            RIG_PERF_TRY(n, numeric(1, max_depth));
            o.tx_depth = static_cast<std::uint32_t>(*n);
            g.tx_depth = true;
            break;
        }
        case opt::cq_mod: {
            RIG_PERF_TRY(n, numeric(min_cq_mod, max_cq_mod));
            o.cq_mod = static_cast<std::uint32_t>(*n);
            g.cq_mod = true;
            break;
        }
        case opt::port: {
            RIG_PERF_TRY(n, numeric(1, 65535));
            o.port = static_cast<std::uint16_t>(*n);
            break;
        }
        case opt::inline_size: {
            RIG_PERF_TRY(n, numeric(0, std::numeric_limits<std::uint32_t>::max()));
            if (*n > max_inline) {
                return std::unexpected(flag + " " + std::to_string(*n) + ": at most " + std::to_string(max_inline) +
                                       " (an inline RDMA WRITE carries 28 bytes on mlx5, 96 on bnxt)");
            }
            o.inline_size = static_cast<std::uint32_t>(*n);
            g.inline_size = true;
            break;
        }
        case opt::mtu: {
            RIG_PERF_TRY(n, numeric(256, 4096));
            if (!std::has_single_bit(*n)) {
                return std::unexpected(flag + " " + std::to_string(*n) + ": not a path MTU (256, 512, 1024, 2048, 4096)");
            }
            o.mtu = static_cast<std::uint32_t>(*n);
            break;
        }
        case opt::cpu_freq: o.ignore_cpu_freq = true; break;
        case opt::perform_warm_up: o.perform_warm_up = true; break;
        case opt::report_gbits: o.report_gbits = true; break;
        case opt::out_json:
            if (!o.json_path) {
                o.json_path = "perftest_out.json";
            }
            break;
        case opt::out_json_file:
            if (v.empty()) {
                return std::unexpected(flag + " '': names no file");
            }
            o.json_path = v;
            break;
        case opt::sim: o.sim = true; break;
        case opt::family:
            if (v != "mlx5" && v != "bnxt" && v != "mixed") {
                return std::unexpected(flag + " " + v + ": not mlx5, bnxt or mixed");
            }
            o.sim_family = v;
            g.sim_family = true;
            break;
        case opt::plot:
            if (v.empty()) {
                return std::unexpected(flag + " '': names no file");
            }
            if (auto f = plot_format_of(v); !f) {  // refused before the run, not after it
                return std::unexpected(flag + " " + v + ": " + f.error());
            }
            o.plot_path = v;
            break;
        case opt::bind: {
            in6_addr a6{};
            in_addr a4{};
            if (::inet_pton(AF_INET, v.c_str(), &a4) != 1 && ::inet_pton(AF_INET6, v.c_str(), &a6) != 1) {
                return std::unexpected(flag + " " + (v.empty() ? std::string("''") : v) +
                                       ": not an IPv4 or IPv6 address");
            }
            o.bind_address = v;
            break;
        }
        case opt::max_size: {
            RIG_PERF_TRY(n, numeric(2, 1ull << 23));
            o.max_size = *n;
            g.max_size = true;
            break;
        }
        case opt::none: break;  // refused above
        }
#undef RIG_PERF_TRY
    }

    if (o.help) {
        return o;
    }
    if (positional.empty()) {
        return std::unexpected("no test named (write_bw, write_lat, read_bw, read_lat, send_bw, send_lat)");
    }
    auto kind = parse_test(positional[0]);
    if (!kind) {
        return std::unexpected(kind.error());
    }
    o.kind = *kind;
    if (positional.size() > 2) {
        return std::unexpected("unexpected argument '" + positional[2] + "' (one server at most)");
    }
    if (positional.size() == 2) {
        o.server = positional[1];
    }

    const bool lat = is_latency(o.kind);
    if (!g.size) {
        o.size = lat ? 2 : 65536;
    }
    if (!g.iterations) {
        o.iterations = o.kind == test_kind::write_bw ? 5000 : 1000;
    }
    if (!g.tx_depth) {
        o.tx_depth = lat ? 1 : 128;
    }
    if (lat && g.tx_depth && o.tx_depth != 1) {
        return std::unexpected("-t " + std::to_string(o.tx_depth) +
                               ": latency tests keep one entry in flight (-t applies to bandwidth tests)");
    }
    if (!g.duration && o.tx_depth > o.iterations) {
        o.tx_depth = static_cast<std::uint32_t>(o.iterations);   // perftest: no deeper than a counted run
    }
    if (lat && g.queue_pairs && o.queue_pairs != 1) {
        // perftest's parser: "Multiple QPs only available on bw tests" (-q 1 is taken)
        return std::unexpected("-q " + std::to_string(o.queue_pairs) +
                               ": multiple queue pairs only available on bandwidth tests (as perftest's)");
    }
    if (lat && g.cq_mod && o.cq_mod != 1) {
        return std::unexpected("-Q " + std::to_string(o.cq_mod) +
                               ": latency tests signal every entry (-Q applies to bandwidth tests)");
    }
    cq_moderation(o, g.cq_mod);
    if (g.duration && g.iterations) {
        return std::unexpected("-D and -n together: a run is timed or counted, not both");
    }
    if (g.duration && o.all_sizes) {
        return std::unexpected("-D and -a together: -a runs every size for -n iterations");
    }
    if (o.bind_address && o.server) {
        return std::unexpected("--bind " + *o.bind_address + ": the server's listening address (no server argument)");
    }
    if (g.max_size && !o.all_sizes) {
        return std::unexpected("--max-size " + std::to_string(o.max_size) + ": applies to -a only");
    }
    if (g.inline_size && o.inline_size > 0 && o.kind != test_kind::write_bw && o.kind != test_kind::write_lat) {
        return std::unexpected("-I " + std::to_string(o.inline_size) + ": " + std::string(test_name(o.kind)) +
                               " has no inline form (rig inlines RDMA WRITE only)");
    }
    if (o.device.empty() && !o.sim) {
        return std::unexpected("no device: -d PCI address or vfio-user:PATH (or --sim)");
    }
    if (o.sim && !o.device.empty()) {
        return std::unexpected("--sim and -d " + o.device + " together: --sim serves its own devices");
    }
    if (g.sim_family && !o.sim) {
        return std::unexpected("--family " + o.sim_family + " without --sim: -d names the device itself");
    }
    if (o.sim && o.server) {
        return std::unexpected("--sim and server " + *o.server + " together: --sim runs both sides here");
    }
    return o;
}

std::string usage() {
    return "usage: rig-perf <test> [options] [server]\n"
           "  tests: write_bw write_lat read_bw read_lat send_bw send_lat (perftest's ib_<test>)\n"
           "  Without a server it waits for a client, as perftest does; give both sides the same options.\n"
           "options (perftest's, with its defaults):\n"
           "  -d, --ib-dev=<dev>        device: a PCI address (0000:3b:00.0) or vfio-user:PATH\n"
           "  -s, --size=<size>         message size (65536 for BW tests, 2 for LAT tests)\n"
           "  -a, --all                 every size 2 .. 2^23 (with a barrier between sizes)\n"
           "  -n, --iters=<n>           iterations, at least 5 (write_bw 5000, others 1000)\n"
           "  -D, --duration=<s>        run for s seconds instead of -n iterations (no peak BW)\n"
           "  -q, --qp=<n>              queue pairs, up to what the NIC allows (BW tests; 1)\n"
           "  -t, --tx-depth=<n>        entries per doorbell batch and in flight (BW 128, LAT 1; at most -n)\n"
           "  -Q, --cq-mod=<n>          signal one send entry in n, 1 .. 1024 (BW tests: 100; 1 for a\n"
           "                            size over 8192 without -a; at most -t)\n"
           "  -p, --port=<port>         out-of-band TCP port (18515)\n"
           "  -I, --inline_size=<n>     inline RDMA WRITE up to n bytes (the NIC's limit: mlx5 28,\n"
           "                            bnxt 96; 0)\n"
           "  -m, --mtu=<mtu>           path MTU offered, 256 .. 4096 (the NIC's); both sides use the smaller\n"
           "  -F, --CPU-freq            accepted: rig-perf times with the monotonic clock, not cycles\n"
           "      --report_gbits        BW in Gb/s (10^9 bit) instead of MiB/s\n"
           "      --perform_warm_up     warm up (-t entries per queue pair, untimed) before every\n"
           "                            size of write_bw and read_bw; without it, before the first\n"
           "      --out_json            write perftest's JSON report to perftest_out.json\n"
           "      --out_json_file=<f>   ...to f\n"
           "  -h, --help                this text\n"
           "rig-perf's own:\n"
           "      --max-size=<n>        -a stops at n bytes\n"
           "      --bind=<addr>         the server listens on this address only (perftest: all)\n"
           "      --sim                 start a device model with two functions, the server in a\n"
           "                            child process, run the client here, stop everything\n"
           "      --family=<f>          --sim's functions: mlx5 (default), bnxt, or mixed (the client\n"
           "                            on mlx5, the server on bnxt: RC between the two families)\n"
           "      --plot=<file>         draw the results against message size (.svg or .png)\n"
           "Other perftest flags are refused with 'not supported'.\n";
}

}  // namespace rig::perf
