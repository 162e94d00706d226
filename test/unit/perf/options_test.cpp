// rig-perf's command line (tools/rig-perf/options.hpp): every flag in its short, long and
// attached forms, the defaults per test, every bad value and the perftest flags refused.
#include <cstdlib>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tools/rig-perf/args.hpp"
#include "tools/rig-perf/options.hpp"

namespace {

using rig::perf::options;
using rig::perf::parse_options;
using rig::perf::test_kind;

const std::string dev = "vfio-user:/tmp/x.sock";

options ok(std::vector<std::string> args) {
    auto o = parse_options(args);
    INFO((o ? std::string() : o.error()));
    REQUIRE(o.has_value());
    return *o;
}
std::string refused(std::vector<std::string> args) {
    auto o = parse_options(args);
    REQUIRE_FALSE(o.has_value());
    return o.error();
}

}  // namespace

TEST_CASE("rig-perf options: perftest's defaults per test", "[unit][perf]") {
    auto w = ok({"write_bw", "-d", dev});
    CHECK(w.kind == test_kind::write_bw);
    CHECK(w.device == dev);
    CHECK_FALSE(w.server.has_value());
    CHECK(w.port == 18515);
    CHECK(w.size == 65536);
    CHECK(w.iterations == 5000);
    CHECK(w.tx_depth == 128);
    CHECK(w.queue_pairs == 1);
    CHECK(w.inline_size == 0);
    CHECK_FALSE(w.all_sizes);
    CHECK(w.max_size == (1u << 23));
    CHECK_FALSE(w.duration.has_value());
    CHECK_FALSE(w.json_path.has_value());
    CHECK_FALSE(w.report_gbits);
    CHECK_FALSE(w.perform_warm_up);   // rig-perf warms up before the first size only (runner.cpp)
    CHECK(ok({"write_bw", "-d", dev, "--perform_warm_up"}).perform_warm_up);
    CHECK(ok({"read_bw", "-d", dev, "--perform_warm"}).perform_warm_up);   // a unique prefix, as getopt_long

    auto r = ok({"read_bw", "-d", dev, "host1"});
    CHECK(r.kind == test_kind::read_bw);
    CHECK(r.iterations == 1000);
    CHECK(r.size == 65536);
    REQUIRE(r.server.has_value());
    CHECK(*r.server == "host1");

    for (const char* t : {"write_lat", "read_lat", "send_lat"}) {
        auto l = ok({t, "-d", dev});
        CHECK(l.size == 2);
        CHECK(l.iterations == 1000);
        CHECK(l.tx_depth == 1);
    }
    CHECK(ok({"send_bw", "-d", dev}).kind == test_kind::send_bw);
}

TEST_CASE("rig-perf options: -Q, CQ moderation by perftest's rules", "[unit][perf]") {
    // DEF_CQ_MOD 100 for the bandwidth tests; latency tests signal every entry
    for (const char* t : {"write_bw", "read_bw", "send_bw"}) {
        INFO(t);
        CHECK(ok({t, "-d", dev, "-s", "64"}).cq_mod == 100);
        CHECK(ok({t, "-d", dev, "-s", "8192"}).cq_mod == 100);
        // over MSG_SIZE_CQ_MOD_LIMIT (8192) a single size signals every entry, unless -Q says
        CHECK(ok({t, "-d", dev}).cq_mod == 1);   // the default size, 65536
        CHECK(ok({t, "-d", dev, "-s", "8193"}).cq_mod == 1);
        CHECK(ok({t, "-d", dev, "-s", "65536", "-Q", "16"}).cq_mod == 16);
        CHECK(ok({t, "-d", dev, "-a"}).cq_mod == 100);   // -a: one setting for every size
    }
    CHECK(ok({"write_bw", "-d", dev, "-s", "64", "-Q", "1"}).cq_mod == 1);
    CHECK(ok({"write_bw", "-d", dev, "-s", "64", "--cq-mod=1024", "-t", "2048"}).cq_mod == 1024);
    // never above -t: the ring would fill with entries no completion frees
    CHECK(ok({"write_bw", "-d", dev, "-s", "64", "-t", "32"}).cq_mod == 32);
    CHECK(ok({"write_bw", "-d", dev, "-s", "64", "-Q", "64", "-t", "16"}).cq_mod == 16);
    // a counted run is no deeper than its iterations (perftest force_dependecies), and -Q no
    // larger than the depth
    const auto short_run = ok({"write_bw", "-d", dev, "-s", "64", "-n", "10"});
    CHECK(short_run.tx_depth == 10);
    CHECK(short_run.cq_mod == 10);
    CHECK(ok({"send_bw", "-d", dev, "-s", "64", "-n", "50", "-t", "64"}).tx_depth == 50);
    CHECK(ok({"write_bw", "-d", dev, "-s", "64", "-D", "1", "-t", "256"}).tx_depth == 256);   // -D: no count
    CHECK(ok({"write_lat", "-d", dev}).cq_mod == 1);
    CHECK(ok({"send_lat", "-d", dev, "-Q", "1"}).cq_mod == 1);
    CHECK(refused({"write_lat", "-d", dev, "-Q", "4"}) ==
          "-Q 4: latency tests signal every entry (-Q applies to bandwidth tests)");
    CHECK(refused({"write_bw", "-d", dev, "-Q", "0"}) == "-Q 0: out of range 1..1024");   // MIN_CQ_MOD .. MAX_CQ_MOD
    CHECK(refused({"write_bw", "-d", dev, "--cq-mod=1025"}) == "--cq-mod 1025: out of range 1..1024");
    CHECK(refused({"write_bw", "-d", dev, "-Q", "x"}) == "-Q x: not a number");
}

TEST_CASE("rig-perf options: short, long, attached and = forms", "[unit][perf]") {
    for (auto args : std::vector<std::vector<std::string>>{
             {"write_bw", "-d", dev, "-s", "4096", "-n", "77", "-q", "3", "-t", "64", "-p", "20000", "-I", "28"},
             {"write_bw", "--ib-dev", dev, "--size", "4096", "--iters", "77", "--qp", "3", "--tx-depth", "64", "--port",
              "20000", "--inline_size", "28"},
             {"write_bw", "--ib-dev=" + dev, "--size=4096", "--iters=77", "--qp=3", "--tx-depth=64", "--port=20000",
              "--inline_size=28"},
             {"write_bw", "-d" + dev, "-s4096", "-n77", "-q3", "-t64", "-p20000", "-I28"},
             {"-s", "0x1000", "write_bw", "-d", dev, "-n", "77", "-q", "3", "-t", "64", "-p", "20000", "-I", "28"},
         }) {
        auto o = ok(args);
        CHECK(o.device == dev);
        CHECK(o.size == 4096);
        CHECK(o.iterations == 77);
        CHECK(o.queue_pairs == 3);
        CHECK(o.tx_depth == 64);
        CHECK(o.port == 20000);
        CHECK(o.inline_size == 28);
    }
    auto a = ok({"send_bw", "-d", dev, "-a", "--max-size", "1024", "--report_gbits", "-F", "--out_json", "server"});
    CHECK(a.all_sizes);
    CHECK(a.max_size == 1024);
    CHECK(a.report_gbits);
    CHECK(a.ignore_cpu_freq);
    REQUIRE(a.json_path.has_value());
    CHECK(*a.json_path == "perftest_out.json");
    CHECK(ok({"write_bw", "-d", dev, "--all", "--CPU-freq"}).all_sizes);
    CHECK(*ok({"write_bw", "-d", dev, "--out_json", "--out_json_file=r.json"}).json_path == "r.json");
    CHECK(*ok({"write_bw", "-d", dev, "--out_json_file", "r.json"}).json_path == "r.json");
    auto d = ok({"write_bw", "-d", dev, "-D", "3"});
    REQUIRE(d.duration.has_value());
    CHECK(d.duration->count() == 3);
    CHECK(ok({"write_bw", "-d", dev, "--duration=7"}).duration->count() == 7);
    auto s = ok({"write_lat", "--sim", "--plot", "out.svg"});
    CHECK(s.sim);
    CHECK(*s.plot_path == "out.svg");
    CHECK(*ok({"write_lat", "--sim", "--plot=o.svg"}).plot_path == "o.svg");
    CHECK(*ok({"write_bw", "--sim", "--plot", "out.png"}).plot_path == "out.png");  // SVG or PNG
    CHECK(*ok({"write_bw", "--sim", "--plot=dir/Out.PNG"}).plot_path == "dir/Out.PNG");
    CHECK(ok({"write_bw", "--sim", "--family", "bnxt"}).sim_family == "bnxt");
    CHECK(ok({"write_bw", "--sim", "--family=mixed"}).sim_family == "mixed");
    CHECK(ok({"write_bw", "--sim"}).sim_family == "mlx5");
    CHECK(ok({"-h"}).help);
    CHECK(ok({"write_bw", "--help"}).help);
    CHECK(ok({"write_bw", "-d", dev, "-n", "5"}).iterations == 5);
    CHECK_FALSE(ok({"write_bw", "-d", dev}).mtu.has_value());  // the NIC's path MTU
    for (std::uint32_t m : {256u, 512u, 1024u, 2048u, 4096u}) {
        CHECK(ok({"write_bw", "-d", dev, "-m", std::to_string(m)}).mtu == m);
    }
    CHECK(ok({"send_lat", "-d", dev, "--mtu=2048"}).mtu == 2048u);
}

TEST_CASE("rig-perf options: each bad value named with the flag", "[unit][perf]") {
    // a format rig-perf cannot write is refused before the run, naming the file and the choices
    for (const char* bad : {"out.jpg", "out", "svg", ".png", "out.png.txt", "out.svgz"}) {
        INFO(bad);
        CHECK(refused({"write_lat", "--sim", "--plot", bad}) ==
              std::string("--plot ") + bad + ": names neither an SVG nor a PNG file (a name ending in .svg or .png)");
    }
    CHECK(refused({}) == "no test named (write_bw, write_lat, read_bw, read_lat, send_bw, send_lat)");
    CHECK(refused({"ping_bw", "-d", dev}) ==
          "unknown test 'ping_bw' (write_bw, write_lat, read_bw, read_lat, send_bw, send_lat)");
    CHECK(refused({"write_bw"}) == "no device: -d PCI address or vfio-user:PATH (or --sim)");
    CHECK(refused({"write_bw", "-d", ""}) == "-d '': names no device (a PCI address or vfio-user:PATH)");
    CHECK(refused({"write_bw", "-d"}) == "-d needs a value");
    CHECK(refused({"write_bw", "-d", dev, "-s", "0"}) == "-s 0: out of range 1..2147483648");
    CHECK(refused({"write_bw", "-d", dev, "-s", "2147483649"}) == "-s 2147483649: out of range 1..2147483648");
    CHECK(refused({"write_bw", "-d", dev, "--size=12k"}) == "--size 12k: not a number");
    CHECK(refused({"write_bw", "-d", dev, "-s", "-5"}) == "-s -5: not a number");
    CHECK(refused({"write_bw", "-d", dev, "-n", "4"}) == "-n 4: out of range 5..100000000");
    CHECK(refused({"write_bw", "-d", dev, "-n", "x"}) == "-n x: not a number");
    CHECK(refused({"write_bw", "-d", dev, "-D", "0"}) == "-D 0: out of range 1..3600");
    CHECK(refused({"write_bw", "-d", dev, "-q", "0"}) == "-q 0: out of range 1..16384");
    CHECK(refused({"write_bw", "-d", dev, "-q", "16385"}) == "-q 16385: out of range 1..16384");   // perftest's MAX_QP_NUM
    CHECK(refused({"write_bw", "-d", dev, "-t", "0"}) == "-t 0: out of range 1..4096");
    CHECK(refused({"write_bw", "-d", dev, "-t", "4097"}) == "-t 4097: out of range 1..4096");
    CHECK(refused({"write_bw", "-d", dev, "-p", "0"}) == "-p 0: out of range 1..65535");
    CHECK(refused({"write_bw", "-d", dev, "--port=65536"}) == "--port 65536: out of range 1..65535");
    CHECK(refused({"write_bw", "-d", dev, "-m", "1000"}) == "-m 1000: not a path MTU (256, 512, 1024, 2048, 4096)");
    CHECK(refused({"write_bw", "-d", dev, "--mtu=1536"}) ==
          "--mtu 1536: not a path MTU (256, 512, 1024, 2048, 4096)");
    CHECK(refused({"write_bw", "-d", dev, "-m", "128"}) == "-m 128: out of range 256..4096");
    CHECK(refused({"write_bw", "-d", dev, "-m", "8192"}) == "-m 8192: out of range 256..4096");
    CHECK(refused({"write_bw", "-d", dev, "-m"}) == "-m needs a value");
    CHECK(refused({"write_bw", "-d", dev, "-I", "97"}) ==
          "-I 97: at most 96 (an inline RDMA WRITE carries 28 bytes on mlx5, 96 on bnxt)");
    CHECK(refused({"write_bw", "-d", dev, "--family", "bnxt"}) == "--family bnxt without --sim: -d names the device itself");
    CHECK(refused({"write_bw", "--sim", "--family", "cx7"}) == "--family cx7: not mlx5, bnxt or mixed");
    CHECK(refused({"read_bw", "-d", dev, "-I", "8"}) == "-I 8: read_bw has no inline form (rig inlines RDMA WRITE only)");
    CHECK(refused({"send_lat", "-d", dev, "-I", "8"}) ==
          "-I 8: send_lat has no inline form (rig inlines RDMA WRITE only)");
    CHECK(refused({"write_bw", "-d", dev, "--max-size", "1"}) == "--max-size 1: out of range 2..8388608");
    CHECK(refused({"write_bw", "-d", dev, "--max-size", "64"}) == "--max-size 64: applies to -a only");
    // --bind (rig-perf's own: the interop suite's server listens on loopback only)
    CHECK(ok({"write_bw", "-d", dev, "--bind", "127.0.0.1"}).bind_address == "127.0.0.1");
    CHECK(ok({"write_bw", "-d", dev, "--bind=::1"}).bind_address == "::1");
    CHECK_FALSE(ok({"write_bw", "-d", dev}).bind_address.has_value());
    CHECK(refused({"write_bw", "-d", dev, "--bind", "localhost"}) == "--bind localhost: not an IPv4 or IPv6 address");
    CHECK(refused({"write_bw", "-d", dev, "--bind", "127.0.0.1", "server"}) ==
          "--bind 127.0.0.1: the server's listening address (no server argument)");
    CHECK(refused({"write_lat", "-d", dev, "-t", "4"}) ==
          "-t 4: latency tests keep one entry in flight (-t applies to bandwidth tests)");
    CHECK(ok({"write_bw", "-d", dev, "-q", "1024"}).queue_pairs == 1024);   // no 64 cap: the NIC's limit
    CHECK(ok({"write_lat", "-d", dev, "-q", "1"}).queue_pairs == 1);        // taken, as perftest's
    CHECK(refused({"send_lat", "-d", dev, "-q", "2"}) ==
          "-q 2: multiple queue pairs only available on bandwidth tests (as perftest's)");
    CHECK(refused({"write_bw", "-d", dev, "-D", "2", "-n", "10"}) == "-D and -n together: a run is timed or counted, not both");
    CHECK(refused({"write_bw", "-d", dev, "-D", "2", "-a"}) == "-D and -a together: -a runs every size for -n iterations");
    CHECK(refused({"write_bw", "-d", dev, "a", "b"}) == "unexpected argument 'b' (one server at most)");
    // getopt_long, as perftest: -a5 is -a then -5 (a cluster of short flags), no value of -a
    CHECK(refused({"write_bw", "-d", dev, "-a5"}) == "unknown option: -5 in -a5 (see --help)");
    CHECK(refused({"write_bw", "-d", dev, "--all=1"}) == "--all takes no value (got '1')");
    CHECK(refused({"write_bw", "-d", dev, "--out_json_file="}) == "--out_json_file '': names no file");
    CHECK(refused({"write_bw", "--sim", "-d", dev}) == "--sim and -d " + dev + " together: --sim serves its own devices");
    CHECK(refused({"write_bw", "--sim", "host"}) == "--sim and server host together: --sim runs both sides here");
    CHECK(refused({"write_bw", "-d", dev, "--frobnicate"}) == "unknown option: --frobnicate (see --help)");
    CHECK(refused({"write_bw", "-d", dev, "-S7"}) == "not supported: -S (service level)");
    // perftest's getopt string has no Y (its --ethertype is long only): -Y is no perftest flag
    CHECK(refused({"write_bw", "-d", dev, "-Y7"}) == "unknown option: -Y in -Y7 (see --help)");
    CHECK(refused({"write_bw", "-d", dev, "--ethertype=7"}) == "not supported: --ethertype (raw Ethernet ethertype)");
}

TEST_CASE("rig-perf options: perftest flags rig-perf lacks are refused by name", "[unit][perf]") {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
        {{"-i", "1"}, "not supported: -i (device port: a Rig function has one port)"},
        {{"--ib-port=1"}, "not supported: --ib-port (device port: a Rig function has one port)"},
        {{"-r", "64"}, "not supported: -r (receive queue depth: rig-perf keeps the receive ring full)"},
        {{"-l", "4"}, "not supported: -l (chain n requests per post)"},
        {{"-x", "3"}, "not supported: -x (GID index: Rig uses GID 0)"},
        {{"-c", "UD"}, "not supported: -c (transport type: Rig runs RC only)"},
        {{"-R"}, "not supported: -R (connect with rdma_cm)"},
        {{"-z"}, "not supported: -z (rdma_cm for the data exchange)"},
        {{"-b"}, "not supported: -b (bidirectional bandwidth)"},
        {{"-N"}, "not supported: -N (skip the peak bandwidth)"},
        {{"-o", "4"}, "not supported: -o (outstanding reads)"},
        {{"-e"}, "not supported: -e (sleep on completion events)"},
        {{"-C"}, "not supported: -C (latency in CPU cycles)"},
        {{"-H"}, "not supported: -H (latency histogram)"},
        {{"-U"}, "not supported: -U (unsorted latency samples)"},
        {{"-V"}, "not supported: -V (print the version)"},
        {{"--run_infinitely"}, "not supported: --run_infinitely (run without end, printing every -D seconds)"},
        {{"--use-srq"}, "not supported: --use-srq (shared receive queue)"},
        {{"--bidirectional"}, "not supported: --bidirectional (bidirectional bandwidth)"},
        {{"--output=bandwidth"}, "not supported: --output (print one number only)"},
        {{"--use_old_post_send"}, "not supported: --use_old_post_send (ibv_post_send instead of ibv_wr_*)"},
    };
    for (const auto& [flags, message] : cases) {
        std::vector<std::string> args{"write_bw", "-d", dev};
        args.insert(args.end(), flags.begin(), flags.end());
        CHECK(refused(args) == message);
    }
}

TEST_CASE("rig-perf options: the usage names every supported flag", "[unit][perf]") {
    const std::string u = rig::perf::usage();
    for (const char* f : {"--ib-dev", "--size", "--all", "--iters", "--duration", "--qp", "--tx-depth", "--cq-mod", "--port",
                          "--inline_size", "--CPU-freq", "--report_gbits", "--out_json", "--out_json_file", "--help",
                          "--max-size", "--sim", "--plot", "--bind"}) {
        CHECK(u.find(f) != std::string::npos);
    }
}

TEST_CASE("rig-perf options: perftest's getopt_long syntax (clusters, prefixes, --, argument rules)", "[unit][perf]") {
    // short flags cluster, the last one taking the argument (attached or next)
    auto c = ok({"write_bw", "-aFd", dev, "--max-size=64"});
    CHECK(c.all_sizes);
    CHECK(c.ignore_cpu_freq);
    CHECK(c.device == dev);
    CHECK(ok({"write_bw", "-Fs4096", "-d", dev}).size == 4096);
    // a unique prefix of a long name is the option; an ambiguous one is refused with its choices
    CHECK(ok({"write_bw", "--ib-d=" + dev, "--siz", "128", "--it=9", "--report_g"}).size == 128);
    CHECK(ok({"write_bw", "--ib-d=" + dev, "--it=9"}).iterations == 9);
    CHECK(ok({"write_bw", "--ib-d", dev, "--report_g"}).report_gbits);
    CHECK(*ok({"write_bw", "--sim", "--pl", "a.svg"}).plot_path == "a.svg");
    CHECK(*ok({"write_bw", "-d", dev, "--out_json"}).json_path == "perftest_out.json");  // exact beats a prefix
    CHECK(refused({"write_bw", "-d", dev, "--rep"}) ==
          "--rep: ambiguous (--report-cycles, --report-histogrm, --report-unsorted, --report-counters, "
          "--report_gbits, --report-both, --report-per-port, --reply_every)");
    CHECK(refused({"write_bw", "-d", dev, "--out=x"}) ==
          "--out: ambiguous (--outs, --output, --out_json, --out_json_file)");
    // a required argument is the next element whatever it looks like, as in perftest
    CHECK(refused({"write_bw", "-d", dev, "-s", "--all"}) == "-s --all: not a number");
    CHECK(ok({"write_bw", "-d", "-x-"}).device == "-x-");
    // "--" ends the options: what follows is positional
    auto e = ok({"-d", dev, "--", "write_bw", "host"});
    CHECK(e.kind == test_kind::write_bw);
    CHECK(*e.server == "host");
    CHECK(refused({"write_bw", "-d", dev, "--", "host", "-s"}) == "unexpected argument '-s' (one server at most)");
    CHECK(*ok({"write_bw", "-d", dev, "--", "-s"}).server == "-s");
    // a lone "-" is a positional, as getopt reads it
    CHECK(*ok({"write_bw", "-d", dev, "-"}).server == "-");
    // options without an argument refuse one in every long spelling; missing arguments named
    CHECK(refused({"write_bw", "-d", dev, "--CPU-freq=1"}) == "--CPU-freq takes no value (got '1')");
    CHECK(refused({"write_bw", "-d", dev, "--CPU=1"}) == "--CPU-freq takes no value (got '1')");
    CHECK(refused({"write_bw", "-d", dev, "--sim="}) == "--sim takes no value (got '')");
    CHECK(refused({"write_bw", "-d", dev, "--out_json_file"}) == "--out_json_file needs a value");
    CHECK(refused({"write_bw", "-d", dev, "--siz"}) == "--size needs a value");
    CHECK(refused({"write_bw", "-d", dev, "--si=4"}) == "--si: ambiguous (--size, --sig_before, --sig_offload, --sim)");
    CHECK(refused({"write_bw", "-d", dev, "--ib=x"}) == "--ib: ambiguous (--ib-dev, --ib-port)");
    CHECK(refused({"write_bw", "-d", dev, "-as"}) == "-s needs a value");
    CHECK(refused({"write_bw", "-d", dev, "--ib-port"}) == "--ib-port needs a value");  // perftest: takes one
    // perftest's options rig-perf lacks, long or short, with or without their argument, and
    // the ones perftest has under #ifdef (some perftest build takes them)
    CHECK(refused({"write_bw", "-d", dev, "-bF"}) == "not supported: -b (bidirectional bandwidth)");
    CHECK(refused({"write_bw", "-d", dev, "-Fb"}) == "not supported: -b (bidirectional bandwidth)");
    CHECK(refused({"write_bw", "-d", dev, "--use_cuda_dmabuf"}) == "not supported: --use_cuda_dmabuf (GPU memory)");
    CHECK(refused({"write_bw", "-d", dev, "--pin_cores=1,2"}) == "not supported: --pin_cores (pin threads to cores)");
    CHECK(refused({"write_bw", "-d", dev, "--bidir"}) == "not supported: --bidirectional (bidirectional bandwidth)");
    CHECK(refused({"write_bw", "-d", dev, "-G"}) == "unknown option: -G (see --help)");  // --use_rss: long only
    CHECK(refused({"write_bw", "-d", dev, "--use_rss"}) == "not supported: --use_rss (receive side scaling)");
    // the first error in the order given, a value before a later syntax error
    CHECK(refused({"write_bw", "-d", dev, "-s", "0", "--frobnicate"}) == "-s 0: out of range 1..2147483648");
    CHECK(refused({"write_bw", "-d", dev, "--frobnicate", "-s", "0"}) == "unknown option: --frobnicate (see --help)");
}

TEST_CASE("rig-perf options: getopt's global state starts over at every parse", "[unit][perf]") {
    // a parse that stopped inside a cluster (-aX...) or before its end leaves nothing behind
    for (int round = 0; round < 3; ++round) {
        CHECK(refused({"write_bw", "-d", dev, "-aXq"}) == "not supported: -X (completion vector for events)");
        CHECK(refused({"write_bw", "-d", dev, "-a9F"}) == "unknown option: -9 in -a9F (see --help)");
        auto o = ok({"read_bw", "-q", "2", "-d", dev, "server"});
        CHECK(o.kind == test_kind::read_bw);
        CHECK(o.queue_pairs == 2);
        CHECK(*o.server == "server");
        CHECK(ok({"write_lat", "-d", dev}).kind == test_kind::write_lat);
        CHECK(refused({"write_bw", "-d", dev, "-Fs"}) == "-s needs a value");
    }
    // POSIXLY_CORRECT would stop a default getopt_long at the test name: not this one
    ::setenv("POSIXLY_CORRECT", "1", 1);
    const auto p = parse_options({"write_bw", "-d", dev, "-s", "64"});
    ::unsetenv("POSIXLY_CORRECT");
    REQUIRE(p.has_value());
    CHECK(p->size == 64);
}

TEST_CASE("rig-perf options: the table is perftest's (its getopt string, each option's argument)", "[unit][perf]") {
    // perftest_parameters.c parser(): its getopt string; a letter with ':' takes an argument
    const std::string perftest = "w:y:p:d:i:m:s:n:t:u:S:x:c:q:I:o:M:r:Q:A:l:D:f:B:T:L:E:J:j:K:k:X:W:aFegzRvhbNVCHUOZP";
    std::size_t letters = 0;
    for (std::size_t i = 0; i < perftest.size(); ++i) {
        if (perftest[i] == ':') {
            continue;
        }
        ++letters;
        const bool takes = i + 1 < perftest.size() && perftest[i + 1] == ':';
        INFO("-" << perftest[i]);
        int found = 0;
        for (const rig::perf::flag& f : rig::perf::flags()) {
            if (f.letter == perftest[i]) {
                ++found;
                CHECK(f.has_arg == takes);
            }
        }
        CHECK(found == 1);
    }
    std::size_t with_letter = 0, names = 0;
    for (const rig::perf::flag& f : rig::perf::flags()) {
        with_letter += f.letter != 0 ? 1 : 0;
        ++names;
        INFO("--" << f.name);
        CHECK((f.id == rig::perf::opt::none) == !f.refusal.empty());  // refused with a reason, or implemented
        int same = 0;
        for (const rig::perf::flag& g : rig::perf::flags()) {
            same += g.name == f.name ? 1 : 0;
        }
        CHECK(same == 1);
        // every option parses in its long form with or without its argument as perftest's does
        std::vector<std::string> args{"write_bw", "--sim", "--" + std::string(f.name)};
        if (f.has_arg) {
            args.push_back(f.name == "family" ? "bnxt" : f.name == "plot" ? "p.svg" : f.name == "bind" ? "::1" : "64");
        }
        if (f.id == rig::perf::opt::none) {
            CHECK(refused(args).starts_with("not supported: --" + std::string(f.name) + " ("));
        }
    }
    CHECK(with_letter == letters);  // no short form perftest lacks
    CHECK(names == 161);            // perftest's 156 long options and rig-perf's 5
}
