#pragma once
// The figures of a run, computed from its timestamps as perftest computes them
// (perftest_parameters.c print_report_bw/print_report_lat).
// Timestamps are nanoseconds of the monotonic clock (perftest counts TSC cycles; -F is moot).
#include <cstdint>
#include <span>

#include "tools/rig-perf/perf_types.hpp"

namespace rig::perf {

// The most (start, end) pairs the peak tries: perftest tries every batch start against every
// group end, n^2 / (batch x cq_mod) pairs, seconds for a million entries signalled one by one.
constexpr std::uint64_t peak_pairs_limit = 50'000'000;

// A bandwidth row: `posted[i]` when entry i was posted, `completed[i]` when the i-th entry was
// seen done (both in order, same length n > 0; the entries a signalled completion stands for
// share its time). The average runs from the first post to the last completion; the peak is
// the best per-entry time over runs that start at a batch start (every `batch` entries) and
// end at a completion-group boundary (perftest print_report_bw): every `cq_mod` entries, and the
// last entry; past peak_pairs_limit pairs, every k-th group end, k the smallest that keeps
// the pairs under it.
bw_row bandwidth(std::uint64_t bytes, std::span<const std::int64_t> posted, std::span<const std::int64_t> completed,
                 std::uint64_t batch, std::uint64_t cq_mod = 1);
// -D: `entries` completed in `elapsed_ns`; no peak (perftest measures none with -D).
bw_row bandwidth_for(std::uint64_t bytes, std::uint64_t entries, std::int64_t elapsed_ns);

// A latency row from the post times of N >= 5 round trips: N - 1 consecutive deltas, divided
// by `rtt_factor` (2 for WRITE and SEND: RTT/2; 1 for READ), sorted; the two largest are left
// out (LAT_MEASURE_TAIL) of n = N - 3: t_typical the median, t_avg/t_stdev over those n,
// t_max = delta[n], percentiles delta[ceil(n * p)], max the largest delta of all.
lat_row latency(std::uint64_t bytes, std::span<const std::int64_t> posted, int rtt_factor);
// -D: `round_trips` in `elapsed_ns`: t_avg = elapsed / round_trips / rtt_factor, tps.
lat_row latency_for(std::uint64_t bytes, std::uint64_t round_trips, std::int64_t elapsed_ns, int rtt_factor);

}  // namespace rig::perf
