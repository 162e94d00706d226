// perftest's printed layout and JSON (report.hpp). The format strings are perftest's macros,
// copied verbatim from upstream perftest_parameters.h (6.29; the LAT ones are identical in
// Debian's 6.06), tabs included.
#include "tools/rig-perf/report.hpp"

#include <charconv>
#include <cmath>
#include <utility>

#include <fmt/printf.h>
#include <nlohmann/json.hpp>

namespace rig::perf {

namespace {

constexpr const char* RESULT_FMT = " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]";
constexpr const char* RESULT_FMT_G = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";
constexpr const char* RESULT_FMT_LAT =
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% "
    "percentile[usec]   99.9% percentile[usec] ";
constexpr const char* RESULT_FMT_LAT_DUR = " #bytes        #iterations       t_avg[usec]    tps average";
constexpr const char* RESULT_EXT = "\n";
constexpr const char* REPORT_FMT = " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t     %-7.6lf";
constexpr const char* REPORT_FMT_EXT = " %-7lu    %lu           %-7.6lf            %-7.6lf            %-7.6lf";
constexpr const char* REPORT_FMT_LAT =
    " %-7lu %lu          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f";
constexpr const char* REPORT_FMT_LAT_DUR = " %-7lu       %lu            %-7.2f        %-7.2f";
constexpr const char* REPORT_EXT = "\n";

// perftest shows BW figures with 6 decimals when --report_gbits and the average is under 0.1.
bool more_decimals(const bw_row& r, bool gbits) { return gbits && gbits_of_mib(r.bw_average_mib) < 0.1; }

using json = nlohmann::ordered_json;  // keeps the keys in perftest's order

// A figure as perftest's JSON writes it, rounded to the decimals of its printf format (%.2f,
// %.6f), so a reader gets the number perftest's file and the table show. JSON has no NaN or
// infinity: a figure that is not finite (a run too short to time, 0/0) is null, where
// perftest's own printf would write a bare nan that no JSON reader takes.
json figure(double v, int decimals) {
    if (!std::isfinite(v)) {
        return nullptr;
    }
    const std::string printed = fmt::sprintf("%.*f", decimals, v);
    double rounded = v;
    std::from_chars(printed.data(), printed.data() + printed.size(), rounded);  // not the locale's strtod
    return rounded;
}

// REPORT_FMT_JSON, or REPORT_FMT_EXT_JSON (6 decimals) where the table prints 6
void bw_fields(json& j, const bw_row& r, bool gbits) {
    const double peak = gbits ? gbits_of_mib(r.bw_peak_mib) : r.bw_peak_mib;
    const double avg = gbits ? gbits_of_mib(r.bw_average_mib) : r.bw_average_mib;
    const int decimals = more_decimals(r, gbits) ? 6 : 2;
    j["MsgSize"] = r.bytes;
    j["n_iterations"] = r.iterations;
    j["BW_peak"] = figure(peak, decimals);
    j["BW_average"] = figure(avg, decimals);
    j["MsgRate"] = figure(r.msg_rate_mpps, 6);
}

// REPORT_FMT_LAT_JSON and rig-perf's percentile_50, percentile_90, t_max_all; with -D
// REPORT_FMT_LAT_DUR_JSON
void lat_fields(json& j, const lat_row& r, bool duration) {
    j["MsgSize"] = r.bytes;
    j["n_iterations"] = r.iterations;
    if (duration) {
        j["t_avg"] = figure(r.t_avg, 2);
        j["tps_average"] = figure(r.tps, 2);
        return;
    }
    const std::pair<const char*, double> fields[] = {
        {"t_min", r.t_min}, {"t_max", r.t_max}, {"t_typical", r.t_typical}, {"t_avg", r.t_avg},
        {"t_stdev", r.t_stdev}, {"percentile_99", r.p99}, {"percentile_99.9", r.p999},
        {"percentile_50", r.p50}, {"percentile_90", r.p90}, {"t_max_all", r.max}};
    for (const auto& [key, v] : fields) {
        j[key] = figure(v, 2);
    }
}

}  // namespace

const std::string result_line = std::string(87, '-') + "\n";

std::string header_block(const test_info& t) {
    std::string s = result_line;
    s += "                    " + test_title(t.kind) + "\n";
    s += fmt::sprintf(" Dual-port       : %s\t\tDevice         : %s\n", "OFF", t.device);
    s += fmt::sprintf(" Number of qps   : %d\t\tTransport type : %s\n", t.queue_pairs, "IB");
    s += fmt::sprintf(" Connection type : %s\t\tUsing SRQ      : %s\n", "RC", "OFF");
    s += fmt::sprintf(" PCIe relax order: %s\t\tLock-free      : %s\n", "OFF", "OFF");
    // Rig posts its own entries: neither of libibverbs' post APIs is in use.
    s += fmt::sprintf(" ibv_wr* API     : %s\t\tUsing Enhanced Reorder      : %s\n", "OFF", "OFF");
    if (t.client) {
        s += fmt::sprintf(" TX depth        : %d\n", t.tx_depth);
    }
    if (is_send(t.kind) && !t.client) {
        s += fmt::sprintf(" RX depth        : %d\n", t.rx_depth);
    }
    if (!is_latency(t.kind)) {
        s += fmt::sprintf(" CQ Moderation   : %d\n", t.cq_mod);
        s += fmt::sprintf(" CQE Poll Batch  : %hu\n", 1);
    }
    s += fmt::sprintf(" Mtu             : %lu[B]\n", t.mtu_bytes);
    s += fmt::sprintf(" Link type       : %s\n", "Ethernet");
    s += fmt::sprintf(" GID index       : %d\n", 0);
    if (!is_read(t.kind)) {
        s += fmt::sprintf(" Max inline data : %d[B]\n", t.inline_size);
    } else {
        s += fmt::sprintf(" Outstand reads  : %d\n", t.out_reads);
    }
    s += fmt::sprintf(" rdma_cm QPs\t : %s\n", "OFF");
    s += fmt::sprintf(" Data ex. method : %s", "Ethernet");
    s += "\n";
    s += result_line;
    return s;
}

std::string address_lines(const test_info& t, bool local, const qp_info& q) {
    std::string s = fmt::sprintf(" %s address: LID %#04x QPN %#06x PSN %#06x", local ? "local" : "remote", q.lid, q.qpn,
                                 q.psn);
    // perftest's switch falls through from READ to WRITE: reads show OUT and RKey/VAddr.
    if (is_read(t.kind)) {
        s += fmt::sprintf(" OUT %#04x", q.out_reads);
    }
    if (is_read(t.kind) || t.kind == test_kind::write_bw || t.kind == test_kind::write_lat) {
        s += fmt::sprintf(" RKey %#08x VAddr %#016llx", q.rkey, static_cast<unsigned long long>(q.vaddr));
    }
    s += "\n GID: ";
    for (std::size_t i = 0; i < 16; ++i) {
        s += fmt::sprintf(i == 15 ? "%02d\n" : "%02d:", std::to_integer<unsigned>(q.gid[i]));
    }
    return s;
}

std::string bw_table_header(bool gbits) { return std::string(gbits ? RESULT_FMT_G : RESULT_FMT) + RESULT_EXT; }

std::string bw_row_line(const bw_row& r, bool gbits) {
    const double peak = gbits ? gbits_of_mib(r.bw_peak_mib) : r.bw_peak_mib;
    const double avg = gbits ? gbits_of_mib(r.bw_average_mib) : r.bw_average_mib;
    return fmt::sprintf(more_decimals(r, gbits) ? REPORT_FMT_EXT : REPORT_FMT, r.bytes, r.iterations, peak, avg,
                        r.msg_rate_mpps) +
           REPORT_EXT;
}

bw_report_wire wire_of(const bw_row& r, bool gbits) noexcept {
    const auto unit = [gbits](double mib) { return gbits ? gbits_of_mib(mib) : mib; };
    return {r.bytes, r.iterations, unit(r.bw_peak_mib), unit(r.bw_average_mib), r.msg_rate_mpps};
}

bw_row row_of(const bw_report_wire& w, bool gbits) noexcept {
    const auto mib = [gbits](double v) { return gbits ? mib_of_gbits(v) : v; };
    return {w.size, w.iters, mib(w.bw_peak), mib(w.bw_avg), w.msg_rate};
}

std::string lat_table_header(bool duration) {
    return std::string(duration ? RESULT_FMT_LAT_DUR : RESULT_FMT_LAT) + RESULT_EXT;
}

std::string lat_row_line(const lat_row& r, bool duration) {
    if (duration) {
        return fmt::sprintf(REPORT_FMT_LAT_DUR, r.bytes, r.iterations, r.t_avg, r.tps) + REPORT_EXT;
    }
    return fmt::sprintf(REPORT_FMT_LAT, r.bytes, r.iterations, r.t_min, r.t_max, r.t_typical, r.t_avg, r.t_stdev, r.p99,
                        r.p999) +
           REPORT_EXT;
}

std::string json_report(const test_info& t, const run_report& r, bool gbits) {
    // test_info, in the order and spelling of perftest's write_test_info_to_file
    std::string title = test_title(t.kind);
    for (char& c : title) {
        c = c == ' ' ? '_' : c;
    }
    json info;
    info["test"] = title;
    info["Dual_port"] = "OFF";
    info["Device"] = t.device;
    info["Number_of_qps"] = t.queue_pairs;
    info["Transport_type"] = "IB";
    info["Connection_type"] = "RC";
    info["Using_SRQ"] = "OFF";
    info["PCIe_relax_order"] = "OFF";
    info["ibv_wr_API"] = "OFF";
    if (t.client) {
        info["TX_depth"] = t.tx_depth;
    }
    if (is_send(t.kind) && !t.client) {
        info["RX_depth"] = t.rx_depth;
    }
    if (!is_latency(t.kind)) {
        info["CQ_Moderation"] = t.cq_mod;
    }
    info["Mtu"] = t.mtu_bytes;
    info["Link_type"] = "Ethernet";
    info["GID_index"] = 0;
    if (!is_read(t.kind)) {
        info["Max_inline_data"] = t.inline_size;
    } else {
        info["Outstand_reads"] = t.out_reads;
    }
    info["rdma_cm_QPs"] = "OFF";
    info["Data_ex_method"] = "Ethernet";

    // results: the last size, as perftest (which writes its file once per size) leaves it;
    // rig_results: every size
    const std::size_t n = is_latency(t.kind) ? r.lat.size() : r.bw.size();
    json rows = json::array();
    for (std::size_t i = 0; i < n; ++i) {
        json row = json::object();
        if (is_latency(t.kind)) {
            lat_fields(row, r.lat[i], t.duration);
        } else {
            bw_fields(row, r.bw[i], gbits);
        }
        rows.push_back(std::move(row));
    }
    json doc;
    doc["test_info"] = std::move(info);
    doc["results"] = n > 0 ? rows.back() : json::object();
    doc["rig_results"] = std::move(rows);
    // perftest's layout: one member a line, no indent; a device name that is not UTF-8 gets
    // U+FFFD rather than an exception
    return doc.dump(0, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace rig::perf
