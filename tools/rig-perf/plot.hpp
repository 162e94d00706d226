#pragma once
// rig-perf --plot FILE.svg or FILE.png: the run's figures against message size. A bandwidth
// report draws the average bandwidth (left axis) and the message rate (right axis, Mpps); a
// latency report draws t_min, t_typical, the 99% and the 99.9% percentiles (µs, log10 axis:
// tails run orders of magnitude above the median). The x axis is log2 of the message size
// (2 B … 8 MiB ticks). Both formats draw the same layout (plot_layout.hpp).
//
// The PNG is rendered by Cairo with DejaVu Sans (plot_png.cpp). The SVG is written here as
// text, not through Cairo's SVG surface: that one turns every label into glyph outlines, so its
// text could no longer be searched, selected, read by a screen reader or restyled, and the
// series and axes would lose their names (<polyline>, <g id="y-left">); written by hand it is
// a few lines per element, checked by an XML parser in the tests.
#include <cstdint>
#include <expected>
#include <string>
#include <vector>

#include "tools/rig-perf/perf_types.hpp"

namespace rig::perf {

namespace plot {
struct layout;
}

enum class plot_format : std::uint8_t { svg, png };

// The format a --plot file name asks for by its extension, ".svg" or ".png" (any case), or
// why not: "names neither an SVG nor a PNG file (a name ending in .svg or .png)". options.cpp
// refuses a bad name with this before the run.
std::expected<plot_format, std::string> plot_format_of(const std::string& path);

// The SVG document for r. Bandwidth in Gb/s (10^9 bit/s) when report_gbits, else MiB/s, as the
// tables print it. Error if r has no rows of its kind or a figure is not finite.
std::expected<std::string, std::string> render_plot(const run_report& r, bool report_gbits = false);
// The same drawing as a 900 x 520 RGB PNG file's bytes (Cairo); the same errors, and Cairo's
// own ("--plot: cairo: ...").
std::expected<std::vector<std::uint8_t>, std::string> render_png(const run_report& r, bool report_gbits = false);

// Writes r's drawing to path in the format its extension names. Errors, and nothing written:
// another extension ("--plot FILE: names neither ..."), an empty report, a file that cannot be
// written (naming it and the reason).
std::expected<void, std::string> write_plot(const std::string& path, const run_report& r, bool report_gbits = false);
// Writes a drawing made elsewhere (plot::layout_of_curves) the same way: the same errors.
std::expected<void, std::string> write_layout(const std::string& path, const plot::layout& d);

}  // namespace rig::perf
