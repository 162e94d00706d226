// Run figures as perftest computes them (stats.hpp).
#include "tools/rig-perf/stats.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace rig::perf {

namespace {

constexpr double mib = 1048576.0;

}  // namespace

bw_row bandwidth(std::uint64_t bytes, std::span<const std::int64_t> posted, std::span<const std::int64_t> completed,
                 std::uint64_t batch, std::uint64_t cq_mod) {
    if (posted.empty() || posted.size() != completed.size() || batch == 0 || cq_mod == 0) {
        throw std::invalid_argument("bandwidth: " + std::to_string(posted.size()) + " posts and " +
                                    std::to_string(completed.size()) + " completions (batch " + std::to_string(batch) +
                                    ", CQ moderation " + std::to_string(cq_mod) +
                                    "): need as many, at least one, batch and moderation > 0");
    }
    const std::uint64_t pairs = (posted.size() / batch + 1) * (posted.size() / cq_mod + 1);
    const std::uint64_t group = cq_mod * ((pairs + peak_pairs_limit - 1) / peak_pairs_limit);
    const std::uint64_t n = posted.size();
    const double total = static_cast<double>(std::max<std::int64_t>(completed[n - 1] - posted[0], 1));
    // print_report_bw: opt_delta starts at the whole run and takes the best per-entry time.
    double best = total;
    for (std::uint64_t i = 0; i < n; i += batch) {
        auto try_run = [&](std::uint64_t j) {
            const double t = static_cast<double>(completed[j] - posted[i]) / static_cast<double>(j - i + 1);
            best = t > 0 ? std::min(best, t) : best;
        };
        for (std::uint64_t j = (i + group) / group * group - 1; j < n; j += group) {
            try_run(j);
        }
        if (n % group != 0) {
            try_run(n - 1);
        }
    }
    bw_row r;
    r.bytes = bytes;
    r.iterations = n;
    const double seconds = total / 1e9;
    r.bw_average_mib = static_cast<double>(bytes) * static_cast<double>(n) / seconds / mib;
    r.msg_rate_mpps = static_cast<double>(n) / seconds / 1e6;
    r.bw_peak_mib = static_cast<double>(bytes) / (best / 1e9) / mib;
    return r;
}

bw_row bandwidth_for(std::uint64_t bytes, std::uint64_t entries, std::int64_t elapsed_ns) {
    bw_row r;
    r.bytes = bytes;
    r.iterations = entries;
    const double seconds = static_cast<double>(std::max<std::int64_t>(elapsed_ns, 1)) / 1e9;
    r.bw_average_mib = static_cast<double>(bytes) * static_cast<double>(entries) / seconds / mib;
    r.msg_rate_mpps = static_cast<double>(entries) / seconds / 1e6;
    return r;
}

lat_row latency(std::uint64_t bytes, std::span<const std::int64_t> posted, int rtt_factor) {
    if (posted.size() < 5 || rtt_factor < 1) {
        throw std::invalid_argument("latency: " + std::to_string(posted.size()) +
                                    " round trips (at least 5) and rtt factor " + std::to_string(rtt_factor));
    }
    std::vector<double> d(posted.size() - 1);
    const double q = 1000.0 * rtt_factor;  // ns to us, then RTT/2 or not
    for (std::size_t i = 0; i + 1 < posted.size(); ++i) {
        d[i] = static_cast<double>(posted[i + 1] - posted[i]) / q;
    }
    std::sort(d.begin(), d.end());
    const std::size_t n = d.size() - 2;  // LAT_MEASURE_TAIL
    lat_row r;
    r.bytes = bytes;
    r.iterations = posted.size();
    r.t_min = d[0];
    r.t_max = d[n];
    r.max = d.back();
    // get_median(n, delta): the mean of the middle two for an even n
    r.t_typical = (n - 1) % 2 != 0 ? (d[n / 2] + d[n / 2 - 1]) / 2 : d[n / 2];
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) {
        sum += d[i];
    }
    r.t_avg = sum / static_cast<double>(n);
    double var = 0;
    for (std::size_t i = 0; i < n; ++i) {
        var += (d[i] - r.t_avg) * (d[i] - r.t_avg);
    }
    r.t_stdev = std::sqrt(var / static_cast<double>(n));
    auto pct = [&](double p) { return d[static_cast<std::size_t>(std::ceil(static_cast<double>(n) * p))]; };
    r.p50 = pct(0.5);
    r.p90 = pct(0.9);
    r.p99 = pct(0.99);
    r.p999 = pct(0.999);
    return r;
}

lat_row latency_for(std::uint64_t bytes, std::uint64_t round_trips, std::int64_t elapsed_ns, int rtt_factor) {
    lat_row r;
    r.bytes = bytes;
    r.iterations = round_trips;
    const double us = static_cast<double>(std::max<std::int64_t>(elapsed_ns, 1)) / 1000.0;
    r.t_avg = round_trips == 0 ? 0 : us / static_cast<double>(round_trips) / rtt_factor;
    r.tps = static_cast<double>(round_trips) / (us / 1e6);
    return r;
}

}  // namespace rig::perf
