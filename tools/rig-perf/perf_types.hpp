#pragma once
// What rig-perf's parts share: the test a run performs, the options it was given, and the
// figures it measured (one row per message size), in perftest's units (perftest's
// src/perftest_parameters.c: print_report_bw, print_report_lat).
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rig::perf {

enum class test_kind : std::uint8_t { write_bw, write_lat, read_bw, read_lat, send_bw, send_lat };

constexpr bool is_latency(test_kind k) noexcept {
    return k == test_kind::write_lat || k == test_kind::read_lat || k == test_kind::send_lat;
}
// perftest's name of the verb a test runs (testsStr[verb])
constexpr std::string_view verb_of(test_kind k) noexcept {
    switch (k) {
    case test_kind::write_bw:
    case test_kind::write_lat: return "RDMA_Write";
    case test_kind::read_bw:
    case test_kind::read_lat: return "RDMA_Read";
    case test_kind::send_bw:
    case test_kind::send_lat: return "Send";
    }
    return "Unknown";
}
// "RDMA_Write BW Test", "Send Latency Test": the title of the test's table and plot (and, with
// '_' for ' ', the JSON "test")
inline std::string test_title(test_kind k) {
    return std::string(verb_of(k)) + (is_latency(k) ? " Latency Test" : " BW Test");
}
constexpr bool is_read(test_kind k) noexcept { return k == test_kind::read_bw || k == test_kind::read_lat; }
constexpr bool is_send(test_kind k) noexcept { return k == test_kind::send_bw || k == test_kind::send_lat; }

struct options {
    test_kind kind = test_kind::write_bw;
    std::string device;                  // -d: PCI address or vfio-user:PATH
    std::optional<std::string> server;   // the positional argument: absent on the server side
    std::uint16_t port = 18515;          // -p: the out-of-band TCP port
    std::uint64_t size = 65536;          // -s (2 for latency tests)
    bool all_sizes = false;              // -a: 2 .. 2^23
    std::uint64_t max_size = 1ull << 23; // --max-size N (rig-perf's own): -a stops at N
    std::uint64_t iterations = 5000;     // -n (write_bw 5000, others 1000)
    std::optional<std::chrono::seconds> duration;  // -D
    std::uint32_t queue_pairs = 1;       // -q
    std::uint32_t tx_depth = 128;        // -t (1 for latency tests)
    std::uint32_t cq_mod = 1;            // -Q: one send entry in cq_mod signalled, <= tx_depth (BW
                                         // tests; perftest's rules in options.cpp: 1 for the
                                         // default size, 65536, else 100)
    std::uint32_t inline_size = 0;       // -I
    std::optional<std::uint32_t> mtu;    // -m: the path MTU offered (256 .. 4096); the NIC's
    bool report_gbits = false;           // --report_gbits
    std::optional<std::string> json_path;  // --out_json / --out_json_file
    bool ignore_cpu_freq = false;        // -F
    bool perform_warm_up = false;        // --perform_warm_up: a warm-up before every size (else
                                         // before the first only; write_bw and read_bw)
    bool sim = false;                    // --sim: a model with two functions, server in a child
    std::string sim_family = "mlx5";     // --family: --sim's functions (mlx5, bnxt, mixed)
    std::optional<std::string> plot_path;  // --plot FILE.svg
    std::optional<std::string> bind_address;  // --bind ADDR (rig-perf's own): the server listens on
                                              // ADDR only (perftest: every address)

    // Added by rig-perf's core (options.cpp sets them; not perftest flags).
    bool help = false;                   // -h / --help: print the usage and exit 0
    // Every out-of-band read, write and connect must finish within this (the client retries a
    // refused connect until it runs out: the server may still be starting).
    std::chrono::milliseconds exchange_timeout{10000};
    // How long a side waits for its peer to finish one message size (a barrier after a run, a
    // latency reply): bounded so that a peer that stops answering is an error, not a hang.
    std::chrono::milliseconds run_timeout{120000};
};

// One row of a bandwidth table (`#bytes #iterations BW peak BW average MsgRate`); the
// bandwidths in MiB/s (2^20 B/s), converted for --report_gbits when printed.
struct bw_row {
    std::uint64_t bytes = 0;
    std::uint64_t iterations = 0;
    double bw_peak_mib = 0;
    double bw_average_mib = 0;
    double msg_rate_mpps = 0;
};

// One row of a latency table, in microseconds, computed as perftest does (print_report_lat: RTT/2 for
// WRITE and SEND, t_max the second largest sample, percentiles at ceil(n * p)).
struct lat_row {
    std::uint64_t bytes = 0;
    std::uint64_t iterations = 0;
    double t_min = 0, t_max = 0, t_typical = 0, t_avg = 0, t_stdev = 0, p99 = 0, p999 = 0;
    // Added: the median and 90th percentile at ceil(n * p) like p99, and the largest sample of
    // all (perftest's t_max hides it). With -D only t_avg and tps are measured (perftest's
    // RESULT_FMT_LAT_DUR).
    double p50 = 0, p90 = 0, max = 0;
    double tps = 0;  // -D: round trips (reads) per second
};

struct run_report {
    test_kind kind = test_kind::write_bw;
    std::vector<bw_row> bw;    // for the _bw tests
    std::vector<lat_row> lat;  // for the _lat tests
};

}  // namespace rig::perf
