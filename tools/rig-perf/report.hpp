#pragma once
// What rig-perf prints and writes, in perftest's exact layout (perftest_parameters.h/.c of
// upstream 6.29): the
// header block (RESULT_LINE of 87 '-', the title, the field lines that apply), the address
// lines, the table headers (RESULT_FMT, RESULT_FMT_G, RESULT_FMT_LAT, RESULT_FMT_LAT_DUR) and
// rows (REPORT_FMT, REPORT_FMT_EXT, REPORT_FMT_LAT, REPORT_FMT_LAT_DUR) and the JSON report,
// whose keys are perftest's verbatim plus, per size, rig-perf's own (see json_report).
// The rows are formatted with perftest's own printf formats (fmt::sprintf), so parsers of
// perftest's output read ours.
#include <cstdint>
#include <string>

#include "tools/rig-perf/exchange.hpp"
#include "tools/rig-perf/perf_types.hpp"

namespace rig::perf {

// The facts the header block and the JSON test_info show.
struct test_info {
    test_kind kind = test_kind::write_bw;
    bool client = true;
    std::string device;
    std::uint32_t queue_pairs = 1;
    std::uint32_t tx_depth = 128;
    std::uint32_t cq_mod = 100;  // bandwidth tests
    std::uint32_t rx_depth = 0;  // send tests, receive side: receives kept posted
    std::uint32_t mtu_bytes = 1024;
    std::uint32_t inline_size = 0;
    std::uint32_t out_reads = 0;  // read tests
    bool duration = false;        // -D
};

extern const std::string result_line;  // 87 '-' and a newline

std::string header_block(const test_info& t);
// " local address: LID 0000 QPN 0x0012 PSN 0xa1b2c3 RKey 0x000100 VAddr 0x00000000100000\n"
// then " GID: 254:128:...\n" (decimal, as perftest prints it).
std::string address_lines(const test_info& t, bool local, const qp_info& q);

std::string bw_table_header(bool gbits);            // with its newline
std::string bw_row_line(const bw_row& r, bool gbits);  // with its newline
std::string lat_table_header(bool duration);
std::string lat_row_line(const lat_row& r, bool duration);

// { "test_info": {...}, "results": {...the last size, perftest's keys...},
//   "rig_results": [ {...every size...} ] }. Latency sizes also carry "percentile_50",
// "percentile_90" and "t_max_all" (the largest sample); -D latency rows "t_avg" and
// "tps_average" as perftest. Written by nlohmann-json in perftest's layout (one member a line,
// keys in perftest's order); each figure is the number perftest prints (rounded to its %.2f or
// %.6f), written in the shortest form that reads back as it ("1.5" for perftest's "1.50"), and
// null when it is not finite (NaN, infinity), so the file is always valid JSON.
std::string json_report(const test_info& t, const run_report& r, bool gbits);

// MiB/s to Gb/s (10^9 bit): x 2^20 x 8 / 10^9.
constexpr double gbits_of_mib(double mib) noexcept { return mib * 1048576.0 / 125000000.0; }
constexpr double mib_of_gbits(double gbits) noexcept { return gbits * 125000000.0 / 1048576.0; }

// The bandwidth report of xchg_bw_reports (write_bw, read_bw: the client's last row, sent
// after its run). perftest fills it in print_report_bw with the figures *as printed*: its
// bandwidths are divided by the report format's factor (0x100000 for MiB/s, 125000000 with
// --report_gbits), so the wire carries the sender's table unit, and the passive server prints
// the client's figures unconverted in its own table (print_full_bw_report(rem_bw_rep): its
// one row). Both sides are meant to run the same flags; rig-perf does the same: wire_of()
// converts a row to the unit its flag prints, row_of() reads the peer's in ours.
bw_report_wire wire_of(const bw_row& r, bool gbits) noexcept;
bw_row row_of(const bw_report_wire& w, bool gbits) noexcept;

}  // namespace rig::perf
