// perftest's printed layout and JSON (report.hpp). The format strings are perftest's macros,
// copied verbatim from upstream perftest_parameters.h (6.29; the LAT ones are identical in
// Debian's 6.06), tabs included.
#include "tools/rig-perf/report.hpp"

#include <fmt/printf.h>

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
constexpr const char* REPORT_FMT_JSON =
    "\"MsgSize\": %lu,\n\"n_iterations\": %lu,\n\"BW_peak\": %.2lf,\n\"BW_average\": %.2lf,\n\"MsgRate\": %.6lf";
constexpr const char* REPORT_FMT_EXT_JSON =
    "\"MsgSize\": %lu,\n\"n_iterations\": %lu,\n\"BW_peak\": %.6lf,\n\"BW_average\": %.6lf,\n\"MsgRate\": %.6lf";
constexpr const char* REPORT_FMT_LAT_JSON =
    "\"MsgSize\": %lu,\n\"n_iterations\": %lu,\n\"t_min\": %.2f,\n\"t_max\": %.2f,\n\"t_typical\": %.2f,\n\"t_avg\": "
    "%.2f,\n\"t_stdev\": %.2f,\n\"percentile_99\": %.2f,\n\"percentile_99.9\": %.2f";
constexpr const char* REPORT_FMT_LAT_DUR_JSON =
    "\"MsgSize\": %lu,\n\"n_iterations\": %lu,\n\"t_avg\": %.2f,\n\"tps_average\": %.2f";

// perftest shows BW figures with 6 decimals when --report_gbits and the average is under 0.1.
bool more_decimals(const bw_row& r, bool gbits) { return gbits && gbits_of_mib(r.bw_average_mib) < 0.1; }

// JSON has no NaN or infinity: printf writes "nan"/"inf", which no JSON reader takes. A figure
// that is not finite (a run too short to time, 0/0) is written as null; perftest's own
// print_report_bw would write the bare word.
std::string finite_json(std::string fields) {
    for (const std::string_view word : {": -nan", ": nan", ": -inf", ": inf"}) {
        for (auto at = fields.find(word); at != std::string::npos; at = fields.find(word, at)) {
            fields.replace(at, word.size(), ": null");
        }
    }
    return fields;
}

std::string bw_fields_json(const bw_row& r, bool gbits) {
    const double peak = gbits ? gbits_of_mib(r.bw_peak_mib) : r.bw_peak_mib;
    const double avg = gbits ? gbits_of_mib(r.bw_average_mib) : r.bw_average_mib;
    return finite_json(fmt::sprintf(more_decimals(r, gbits) ? REPORT_FMT_EXT_JSON : REPORT_FMT_JSON, r.bytes,
                                    r.iterations, peak, avg, r.msg_rate_mpps));
}

std::string lat_fields_json(const lat_row& r, bool duration) {
    if (duration) {
        return finite_json(fmt::sprintf(REPORT_FMT_LAT_DUR_JSON, r.bytes, r.iterations, r.t_avg, r.tps));
    }
    return finite_json(fmt::sprintf(REPORT_FMT_LAT_JSON, r.bytes, r.iterations, r.t_min, r.t_max, r.t_typical, r.t_avg,
                                    r.t_stdev, r.p99, r.p999) +
                       fmt::sprintf(",\n\"percentile_50\": %.2f,\n\"percentile_90\": %.2f,\n\"t_max_all\": %.2f",
                                    r.p50, r.p90, r.max));
}

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            out += fmt::sprintf("\\u%04x", static_cast<unsigned>(c));
        } else {
            out += c;
        }
    }
    return out + "\"";
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
        // Rig completes every entry (each is signaled): one completion per entry.
        s += fmt::sprintf(" CQ Moderation   : %d\n", 1);
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
    std::string s = "{\n\"test_info\": {\n";
    s += "\"test\": " + json_string(title) + ",\n";
    s += "\"Dual_port\": \"OFF\",\n\"Device\": " + json_string(t.device) + ",\n";
    s += fmt::sprintf("\"Number_of_qps\": %d,\n\"Transport_type\": \"%s\",\n", t.queue_pairs, "IB");
    s += "\"Connection_type\": \"RC\",\n\"Using_SRQ\": \"OFF\",\n";
    s += "\"PCIe_relax_order\": \"OFF\",\n\"ibv_wr_API\": \"OFF\",\n";
    if (t.client) {
        s += fmt::sprintf("\"TX_depth\": %d,\n", t.tx_depth);
    }
    if (is_send(t.kind) && !t.client) {
        s += fmt::sprintf("\"RX_depth\": %d,\n", t.rx_depth);
    }
    if (!is_latency(t.kind)) {
        s += "\"CQ_Moderation\": 1,\n";
    }
    s += fmt::sprintf("\"Mtu\": %lu,\n\"Link_type\": \"%s\",\n\"GID_index\": %d,\n", t.mtu_bytes, "Ethernet", 0);
    if (!is_read(t.kind)) {
        s += fmt::sprintf("\"Max_inline_data\": %d,\n", t.inline_size);
    } else {
        s += fmt::sprintf("\"Outstand_reads\": %d,\n", t.out_reads);
    }
    s += "\"rdma_cm_QPs\": \"OFF\",\n\"Data_ex_method\": \"Ethernet\"\n},\n";

    // results: the last size, as perftest (which writes its file once per size) leaves it
    auto fields = [&](std::size_t i) {
        return is_latency(t.kind) ? lat_fields_json(r.lat[i], t.duration) : bw_fields_json(r.bw[i], gbits);
    };
    const std::size_t n = is_latency(t.kind) ? r.lat.size() : r.bw.size();
    s += "\"results\": {\n";
    if (n > 0) {
        s += fields(n - 1) + "\n";
    }
    s += "},\n\"rig_results\": [";
    for (std::size_t i = 0; i < n; ++i) {
        s += std::string(i == 0 ? "\n" : ",\n") + "{\n" + fields(i) + "\n}";
    }
    s += "\n]\n}\n";
    return s;
}

}  // namespace rig::perf
