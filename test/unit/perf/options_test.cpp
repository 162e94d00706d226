// rig-perf's command line (tools/rig-perf/options.hpp): every flag in its short, long and
// attached forms, the defaults per test, every bad value and the perftest flags refused.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

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
    CHECK(refused({"write_bw", "-d", dev, "-a5"}) == "-a takes no value (got '5')");
    CHECK(refused({"write_bw", "-d", dev, "--all=1"}) == "--all takes no value (got '1')");
    CHECK(refused({"write_bw", "-d", dev, "--out_json_file="}) == "--out_json_file '': names no file");
    CHECK(refused({"write_bw", "--sim", "-d", dev}) == "--sim and -d " + dev + " together: --sim serves its own devices");
    CHECK(refused({"write_bw", "--sim", "host"}) == "--sim and server host together: --sim runs both sides here");
    CHECK(refused({"write_bw", "-d", dev, "--frobnicate"}) == "unknown option: --frobnicate (see --help)");
    CHECK(refused({"write_bw", "-d", dev, "-Y7"}) == "not supported: -Y (raw Ethernet ethertype)");
}

TEST_CASE("rig-perf options: perftest flags rig-perf lacks are refused by name", "[unit][perf]") {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
        {{"-i", "1"}, "not supported: -i (device port: a Rig function has one port)"},
        {{"--ib-port=1"}, "not supported: --ib-port (device port: a Rig function has one port)"},
        {{"-r", "64"}, "not supported: -r (receive queue depth: rig-perf keeps the receive ring full)"},
        {{"-Q", "1"}, "not supported: -Q (signal one entry in n: Rig completes every entry)"},
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
    for (const char* f : {"--ib-dev", "--size", "--all", "--iters", "--duration", "--qp", "--tx-depth", "--port",
                          "--inline_size", "--CPU-freq", "--report_gbits", "--out_json", "--out_json_file", "--help",
                          "--max-size", "--sim", "--plot", "--bind"}) {
        CHECK(u.find(f) != std::string::npos);
    }
}
