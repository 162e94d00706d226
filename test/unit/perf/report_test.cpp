// rig-perf's output (tools/rig-perf/report.hpp) against perftest's exact strings, and its
// figures (stats.hpp) against perftest's arithmetic on known timestamps.
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tools/rig-perf/report.hpp"
#include "tools/rig-perf/stats.hpp"

namespace {

using namespace rig::perf;

}  // namespace

TEST_CASE("report: perftest's table headers, byte for byte", "[unit][perf]") {
    CHECK(result_line == std::string(87, '-') + "\n");
    CHECK(bw_table_header(false) ==
          " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n");
    CHECK(bw_table_header(true) == " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n");
    CHECK(lat_table_header(false) ==
          " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% "
          "percentile[usec]   99.9% percentile[usec] \n");
    CHECK(lat_table_header(true) == " #bytes        #iterations       t_avg[usec]    tps average\n");
}

TEST_CASE("report: rows in REPORT_FMT, REPORT_FMT_EXT, REPORT_FMT_LAT", "[unit][perf]") {
    const bw_row b{65536, 5000, 11234.567, 11000.1, 0.176002};
    CHECK(bw_row_line(b, false) == " 65536      5000             11234.57            11000.10\t\t     0.176002\n");
    // --report_gbits: MiB/s x 2^20 x 8 / 10^9
    CHECK(bw_row_line(b, true) == " 65536      5000             94.24              92.28  \t\t     0.176002\n");
    // under 0.1 Gb/s: six decimals (perftest's issue #132 row: 2 5000 0.042350 0.042185 2.636533)
    const bw_row small{2, 5000, 5.04848, 5.02881, 2.636533};
    CHECK(bw_row_line(small, true) == " 2          5000           0.042350            0.042185            2.636533\n");
    const lat_row l{2, 1000, 1.5, 3.25, 1.75, 1.8, 0.12, 2.9, 3.1, 1.7, 2.0, 9.5, 0};
    CHECK(lat_row_line(l, false) ==
          " 2       1000          1.50           3.25         1.75     \t       1.80        \t0.12   \t\t2.90    \t\t3.10   \n");
    lat_row d;
    d.bytes = 16;
    d.iterations = 581;
    d.t_avg = 1722.62;
    d.tps = 290.26;
    CHECK(lat_row_line(d, true) == " 16            581            1722.62        290.26 \n");
}

TEST_CASE("report: the header block and the address lines", "[unit][perf]") {
    test_info t;
    t.kind = test_kind::write_bw;
    t.device = "vfio-user:/tmp/m/mlx5-0.sock";
    t.cq_mod = 100;
    const std::string h = header_block(t);
    CHECK(h == result_line + "                    RDMA_Write BW Test\n"
                             " Dual-port       : OFF\t\tDevice         : vfio-user:/tmp/m/mlx5-0.sock\n"
                             " Number of qps   : 1\t\tTransport type : IB\n"
                             " Connection type : RC\t\tUsing SRQ      : OFF\n"
                             " PCIe relax order: OFF\t\tLock-free      : OFF\n"
                             " ibv_wr* API     : OFF\t\tUsing Enhanced Reorder      : OFF\n"
                             " TX depth        : 128\n"
                             " CQ Moderation   : 100\n"
                             " CQE Poll Batch  : 1\n"
                             " Mtu             : 1024[B]\n"
                             " Link type       : Ethernet\n"
                             " GID index       : 0\n"
                             " Max inline data : 0[B]\n"
                             " rdma_cm QPs\t : OFF\n"
                             " Data ex. method : Ethernet\n" +
                   result_line);
    // a send server shows RX depth and no TX depth; reads show Outstand reads; latency no CQ lines
    t.kind = test_kind::send_lat;
    t.client = false;
    t.rx_depth = 512;
    const std::string s = header_block(t);
    CHECK(s.find("Send Latency Test\n") != std::string::npos);
    CHECK(s.find(" RX depth        : 512\n") != std::string::npos);
    CHECK(s.find("TX depth") == std::string::npos);
    CHECK(s.find("CQ Moderation") == std::string::npos);
    t.kind = test_kind::read_bw;
    t.out_reads = 16;
    const std::string r = header_block(t);
    CHECK(r.find("RDMA_Read BW Test\n") != std::string::npos);
    CHECK(r.find(" Outstand reads  : 16\n") != std::string::npos);
    CHECK(r.find("Max inline") == std::string::npos);

    qp_info q;
    q.qpn = 0x32;
    q.psn = 0x5f2841;
    q.rkey = 0x2440;
    q.vaddr = 0x7f2e5f64b000;
    q.out_reads = 16;
    q.gid = {std::byte{0xfe}, std::byte{0x80}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0},
             std::byte{0},    std::byte{0},    std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0xff},
             std::byte{0xfe}, std::byte{0},    std::byte{0}, std::byte{1}};
    t.kind = test_kind::write_bw;
    CHECK(address_lines(t, true, q) ==
          " local address: LID 0000 QPN 0x0032 PSN 0x5f2841 RKey 0x002440 VAddr 0x007f2e5f64b000\n"
          " GID: 254:128:00:00:00:00:00:00:00:00:00:255:254:00:00:01\n");
    t.kind = test_kind::read_lat;
    CHECK(address_lines(t, false, q).starts_with(
        " remote address: LID 0000 QPN 0x0032 PSN 0x5f2841 OUT 0x10 RKey 0x002440 VAddr 0x007f2e5f64b000\n"));
    t.kind = test_kind::send_bw;
    CHECK(address_lines(t, true, q).starts_with(" local address: LID 0000 QPN 0x0032 PSN 0x5f2841\n"));
}

TEST_CASE("report: JSON with perftest's keys, the last size in results, every size after", "[unit][perf]") {
    test_info t;
    t.kind = test_kind::write_bw;
    t.device = "dev";
    t.cq_mod = 1;
    run_report r;
    r.kind = t.kind;
    r.bw = {bw_row{2, 100, 1, 0.5, 0.25}, bw_row{4, 100, 2, 1.5, 0.375}};
    const std::string j = json_report(t, r, false);
    // perftest's layout (one member a line, no indent); its figures in their shortest form
    // (nlohmann-json): 2.0 where perftest's printf writes 2.00, the same number to a reader
    CHECK(j.starts_with("{\n\"test_info\": {\n\"test\": \"RDMA_Write_BW_Test\",\n\"Dual_port\": \"OFF\",\n\"Device\": "
                        "\"dev\",\n\"Number_of_qps\": 1,\n\"Transport_type\": \"IB\",\n"));
    for (const char* key : {"\"Connection_type\": \"RC\"", "\"Using_SRQ\": \"OFF\"", "\"TX_depth\": 128",
                            "\"CQ_Moderation\": 1", "\"Mtu\": 1024", "\"Link_type\": \"Ethernet\"", "\"GID_index\": 0",
                            "\"Max_inline_data\": 0", "\"rdma_cm_QPs\": \"OFF\"", "\"Data_ex_method\": \"Ethernet\""}) {
        CHECK(j.find(key) != std::string::npos);
    }
    CHECK(j.find("\"results\": {\n\"MsgSize\": 4,\n\"n_iterations\": 100,\n\"BW_peak\": 2.0,\n\"BW_average\": "
                 "1.5,\n\"MsgRate\": 0.375\n},\n") != std::string::npos);
    CHECK(j.find("\"rig_results\": [\n{\n\"MsgSize\": 2,") != std::string::npos);
    CHECK(j.ends_with("\"MsgRate\": 0.375\n}\n]\n}\n"));
    // a JSON reader's view: the keys in perftest's order, the figures as the table prints them
    const auto doc = nlohmann::ordered_json::parse(j);
    std::vector<std::string> keys;
    for (const auto& [k, v] : doc["test_info"].items()) {
        keys.push_back(k);
    }
    CHECK(keys == std::vector<std::string>{"test", "Dual_port", "Device", "Number_of_qps", "Transport_type",
                                           "Connection_type", "Using_SRQ", "PCIe_relax_order", "ibv_wr_API",
                                           "TX_depth", "CQ_Moderation", "Mtu", "Link_type", "GID_index",
                                           "Max_inline_data", "rdma_cm_QPs", "Data_ex_method"});
    keys.clear();
    for (const auto& [k, v] : doc.items()) {
        keys.push_back(k);
    }
    CHECK(keys == std::vector<std::string>{"test_info", "results", "rig_results"});
    CHECK(doc["rig_results"].size() == 2);
    CHECK(doc["rig_results"][1] == doc["results"]);
    CHECK(doc["results"]["MsgSize"].is_number_unsigned());

    t.kind = test_kind::send_lat;
    run_report l;
    l.kind = t.kind;
    l.lat = {lat_row{2, 1000, 1.5, 3.25, 1.75, 1.8, 0.12, 2.9, 3.1, 1.7, 2.0, 9.5, 0}};
    const std::string k = json_report(t, l, false);
    CHECK(k.find("\"test\": \"Send_Latency_Test\"") != std::string::npos);
    CHECK(k.find("\"results\": {\n\"MsgSize\": 2,\n\"n_iterations\": 1000,\n\"t_min\": 1.5,\n\"t_max\": 3.25,\n"
                 "\"t_typical\": 1.75,\n\"t_avg\": 1.8,\n\"t_stdev\": 0.12,\n\"percentile_99\": 2.9,\n"
                 "\"percentile_99.9\": 3.1,\n\"percentile_50\": 1.7,\n\"percentile_90\": 2.0,\n"
                 "\"t_max_all\": 9.5\n}") != std::string::npos);
    CHECK(k.find("CQ_Moderation") == std::string::npos);

    // each figure is the number perftest prints: %.2f (or %.6f) rounded, not the raw double
    run_report p;
    p.kind = test_kind::write_bw;
    p.bw = {bw_row{65536, 5000, 11234.567, 11000.1049, 0.17600249}};
    t.kind = test_kind::write_bw;
    const auto pd = nlohmann::json::parse(json_report(t, p, false));
    CHECK(pd["results"]["BW_peak"].get<double>() == 11234.57);
    CHECK(pd["results"]["BW_average"].get<double>() == 11000.10);
    CHECK(pd["results"]["MsgRate"].get<double>() == 0.176002);
    // --report_gbits below 0.1 Gb/s: six decimals, as REPORT_FMT_EXT_JSON
    p.bw = {bw_row{2, 100, 1.0, 1.0, 0.5}};  // 1 MiB/s = 0.008388608 Gb/s
    const std::string g = json_report(t, p, true);
    CHECK(g.find("\"BW_peak\": 0.008389,\n\"BW_average\": 0.008389,\n\"MsgRate\": 0.5\n") != std::string::npos);
    // a device name is a JSON string, escaped; bytes that are not UTF-8 become U+FFFD, not a throw
    t.device = "vfio-user:/tmp/a \"b\"\\c\n\xff";
    const auto dd = nlohmann::json::parse(json_report(t, r, false));
    CHECK(dd["test_info"]["Device"] == "vfio-user:/tmp/a \"b\"\\c\n\xef\xbf\xbd");
    // an empty report is still a document
    run_report none;
    none.kind = test_kind::write_bw;
    const auto nd = nlohmann::json::parse(json_report(t, none, false));
    CHECK(nd["results"].empty());
    CHECK(nd["rig_results"].empty());
}

TEST_CASE("stats: latency as perftest computes it", "[unit][perf]") {
    // 11 posts 0, 10, 30, 60, ...: deltas 10, 20, ..., 100 ns; RTT/2 -> 0.005 .. 0.05 us
    std::vector<std::int64_t> posted{0};
    for (int i = 1; i <= 10; ++i) {
        posted.push_back(posted.back() + 10 * i);
    }
    const lat_row r = latency(2, posted, 2);
    CHECK(r.iterations == 11);
    // n = 10 - 2 = 8 sorted deltas kept: 5..40 ns / 1000 (us)
    CHECK(r.t_min == Approx(0.005));
    CHECK(r.t_max == Approx(0.045));    // delta[n]: the second largest
    CHECK(r.max == Approx(0.050));      // the largest, which perftest hides
    CHECK(r.t_typical == Approx(0.0225));  // n even: mean of delta[3] and delta[4]
    CHECK(r.t_avg == Approx(0.0225));
    CHECK(r.p99 == Approx(0.045));      // delta[ceil(8 * 0.99)] = delta[8]
    CHECK(r.p50 == Approx(0.025));      // delta[4]
    CHECK(r.t_stdev == Approx(0.011456).epsilon(0.001));
    CHECK(latency(2, posted, 1).t_min == Approx(0.010));  // READ: no /2
    CHECK_THROWS_AS(latency(2, std::vector<std::int64_t>{0, 1, 2, 3}, 2), std::invalid_argument);
}

TEST_CASE("stats: bandwidth average, peak and message rate", "[unit][perf]") {
    // 200 entries of 1 MiB, all posted at 0, completed 1 ms apart: 200 ms in all
    std::vector<std::int64_t> posted(200, 0), completed(200);
    for (int i = 0; i < 200; ++i) {
        completed[static_cast<std::size_t>(i)] = (i + 1) * 1'000'000;
    }
    const bw_row r = bandwidth(1 << 20, posted, completed, 200);
    CHECK(r.iterations == 200);
    CHECK(r.bw_average_mib == Approx(1000.0));  // 200 MiB in 0.2 s
    CHECK(r.msg_rate_mpps == Approx(0.001));
    CHECK(r.bw_peak_mib == Approx(1000.0));     // steady: the peak is the average
    // a fast first group: entries 0..99 done by 10 ms -> peak 100 MiB / 10 ms
    for (int i = 0; i < 100; ++i) {
        completed[static_cast<std::size_t>(i)] = (i + 1) * 100'000;
    }
    CHECK(bandwidth(1 << 20, posted, completed, 200).bw_peak_mib == Approx(10000.0));
    CHECK_THROWS_AS(bandwidth(1, std::vector<std::int64_t>{}, std::vector<std::int64_t>{}, 1), std::invalid_argument);
    CHECK_THROWS_AS(bandwidth(1, posted, completed, 200, 0), std::invalid_argument);
    // -Q 64: the runs end every 64 entries (63, 127, 191) and at the last (199); a fast first
    // 64 entries (done by 6.4 ms) are the peak: 64 MiB / 6.4 ms
    for (int i = 0; i < 200; ++i) {
        completed[static_cast<std::size_t>(i)] = (i + 1) * 1'000'000;
    }
    for (int i = 0; i < 64; ++i) {
        completed[static_cast<std::size_t>(i)] = 6'400'000;   // one completion stands for all 64
    }
    CHECK(bandwidth(1 << 20, posted, completed, 200, 64).bw_peak_mib == Approx(10000.0));
    // every entry its own completion: entry 63 ends a run as well
    CHECK(bandwidth(1 << 20, posted, completed, 200, 1).bw_peak_mib == Approx(10000.0));
    // -Q 100 over the same times: the runs end at 99 and 199 only, 100 MiB by 100 ms
    CHECK(bandwidth(1 << 20, posted, completed, 200, 100).bw_peak_mib == Approx(1000.0));
    const bw_row d = bandwidth_for(1 << 20, 500, 1'000'000'000);
    CHECK(d.bw_average_mib == Approx(500.0));
    CHECK(d.bw_peak_mib == 0);
    CHECK(d.msg_rate_mpps == Approx(0.0005));
}

TEST_CASE("report: the bandwidth report goes on the wire in the unit the table prints", "[unit][perf]") {
    const bw_row r{65536, 5000, 11234.567, 11000.1, 0.176002};
    const bw_report_wire mib = wire_of(r, false);
    CHECK(mib.size == 65536);
    CHECK(mib.iters == 5000);
    CHECK(mib.bw_peak == 11234.567);
    CHECK(mib.bw_avg == 11000.1);
    CHECK(mib.msg_rate == 0.176002);
    const bw_report_wire g = wire_of(r, true);  // perftest: bw / 125000000 instead of / 0x100000
    CHECK(g.bw_peak == Approx(11234.567 * 1048576 / 125e6));
    CHECK(g.bw_avg == Approx(92.2755).epsilon(1e-5));
    CHECK(g.msg_rate == 0.176002);  // Mpps either way
    for (const bool gbits : {false, true}) {
        INFO("gbits " << gbits);
        // the server's row from the client's report prints what the client printed
        CHECK(bw_row_line(row_of(wire_of(r, gbits), gbits), gbits) == bw_row_line(r, gbits));
        const bw_row small{2, 5000, 5.04848, 5.02881, 2.636533};
        CHECK(bw_row_line(row_of(wire_of(small, gbits), gbits), gbits) == bw_row_line(small, gbits));
    }
    // a perftest client's Gb/s figures, printed by a --report_gbits server as they came
    CHECK(bw_row_line(row_of({65536, 5000, 94.24, 92.28, 0.176002}, true), true) ==
          " 65536      5000             94.24              92.28  \t\t     0.176002\n");
}

TEST_CASE("report: figures that are no finite number are null in the JSON, never a bare nan or inf", "[unit][perf]") {
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    test_info t;
    t.kind = test_kind::write_bw;
    t.device = "dev";
    run_report r;
    r.kind = t.kind;
    r.bw = {bw_row{2, 100, nan, -inf, inf}};
    const std::string j = json_report(t, r, false);
    CHECK(j.find("\"BW_peak\": null,\n\"BW_average\": null,\n\"MsgRate\": null\n") != std::string::npos);
    t.kind = test_kind::write_lat;
    run_report l;
    l.kind = t.kind;
    l.lat = {lat_row{2, 1000, nan, inf, 1.75, 1.8, nan, 2.9, 3.1, 1.7, 2.0, -nan, 0}};
    const std::string k = json_report(t, l, false);
    CHECK(k.find("\"t_min\": null,\n\"t_max\": null,\n\"t_typical\": 1.75,") != std::string::npos);
    for (const std::string& text : {j, k}) {
        CHECK(nlohmann::json::accept(text));  // valid JSON, whatever the figures
        CHECK(text.find(": nan") == std::string::npos);
        CHECK(text.find(": -nan") == std::string::npos);
        CHECK(text.find(": inf") == std::string::npos);
        CHECK(text.find(": -inf") == std::string::npos);
    }
}
