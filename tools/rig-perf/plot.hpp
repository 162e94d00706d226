#pragma once
// rig-perf --plot FILE.svg: the run's figures against message size, drawn as SVG by hand (no
// plotting dependency). A bandwidth report draws the average bandwidth (left axis) and the
// message rate (right axis, Mpps); a latency report draws t_min, t_typical, the 99% and the
// 99.9% percentiles (µs, log10 axis: tails run orders of magnitude above the median). The x
// axis is log2 of the message size (2 B … 8 MiB ticks).
#include <expected>
#include <string>

#include "perf_types.hpp"

namespace rig::perf {

// The SVG document for r. Bandwidth in Gb/s (10^9 bit/s) when report_gbits, else MiB/s, as the
// tables print it. Error if r has no rows of its kind or a figure is not finite.
std::expected<std::string, std::string> render_plot(const run_report& r, bool report_gbits = false);

// Writes render_plot(r) to path. Errors, and nothing written: a path not ending in .svg
// ("--plot: only SVG is written (FILE)"), an empty report, a file that cannot be written
// (naming it and the reason).
std::expected<void, std::string> write_plot(const std::string& path, const run_report& r, bool report_gbits = false);

}  // namespace rig::perf
