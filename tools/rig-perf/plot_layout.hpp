#pragma once
// What rig-perf --plot draws, whatever the file format: the canvas, the title, the axes (their
// ranges, ticks, grid lines and labels), the frame, one series per figure with its points
// already in canvas coordinates, and the legend. plot.cpp writes it as SVG and plot_png.cpp
// renders it through Cairo, so both formats show the same drawing from one computation.
//
// Coordinates are SVG user units with y down, on a 900 x 520 canvas (the PNG's pixels). The x
// axis is log2 of the message size; the left value axis is linear from 0 (bandwidth) or log10
// over whole decades (latency); the right one (message rate) linear from 0.
#include <cstdint>
#include <expected>
#include <string>
#include <utility>
#include <vector>

#include "tools/rig-perf/perf_types.hpp"

namespace rig::perf::plot {

constexpr double canvas_w = 900, canvas_h = 520;
// the frame of the data; the margins hold the ticks, labels, title and legend
constexpr double frame_left = 90, frame_right = 810, frame_top = 80, frame_bottom = 440;

enum class anchor : std::uint8_t { start, middle, end };
// What a label is, which sets its font: the heading, an axis's name, a value tick, a size
// tick (smaller: up to 16 of them share the x axis), a legend entry.
enum class role : std::uint8_t { heading, axis_name, value_tick, size_tick, legend };

struct label {
    double x = 0, y = 0;  // the baseline's anchor point (or the rotation's centre)
    std::string text;
    anchor a = anchor::start;
    role r = role::value_tick;
    int rotate = 0;  // degrees clockwise about (x, y): 0, -90 (reads upward) or 90
};

struct segment {
    double x1 = 0, y1 = 0, x2 = 0, y2 = 0;
};

struct axis {
    std::string id;               // "y-left", "y-right", "x"
    std::vector<segment> grid;    // light lines across the frame, one per value tick
    std::vector<segment> marks;   // the tick marks outside the frame
    std::vector<label> labels;    // the tick labels, then the axis's name
};

struct series {
    std::string name;
    std::uint32_t colour = 0;  // 0xRRGGBB
    bool dashed = false;       // the right axis's series
    std::vector<std::pair<double, double>> points;  // one per size, canvas coordinates
};

struct legend_entry {
    segment sample;  // a stroke in the series' style
    label name;
    std::uint32_t colour = 0;
    bool dashed = false;
};

struct layout {
    std::string title;  // also the SVG's <title>
    label heading;
    std::vector<axis> axes;
    std::vector<series> lines;
    std::vector<legend_entry> legend;
};

constexpr std::uint32_t grid_colour = 0xe0e0e0;
constexpr double marker_radius = 3;
constexpr double line_width = 2;
constexpr double dash_on = 6, dash_off = 4;

// The drawing of r: bandwidth in Gb/s (10^9 bit/s) when report_gbits, else MiB/s, as the
// tables print it. Errors ("--plot: ..."): no rows of r's kind, a 0-byte size, a figure that
// is negative or not finite.
std::expected<layout, std::string> layout_of(const run_report& r, bool report_gbits);

// One curve of layout_of_curves: its value at each x, on the left (linear from 0) or right axis.
struct curve {
    std::string name;
    std::uint32_t colour = 0;
    bool right_axis = false;
    std::vector<double> values;
};

// The same drawing for curves against a count (bench/scale_bench.cpp: message rate and latency
// against queue pairs), x on a log2 axis labelled with the plain numbers. Errors ("--plot: ..."):
// an x below 1, a curve without a finite, non-negative value for every x.
std::expected<layout, std::string> layout_of_curves(const std::string& title, const std::string& x_name,
                                                    const std::vector<double>& xs, const std::vector<curve>& curves,
                                                    const std::string& left_name, const std::string& right_name);

// "2 B", "64 KiB", "8 MiB": a power of two in the largest binary unit it fills.
std::string size_label(double bytes);

// The drawing rendered by Cairo at one pixel a unit and encoded as a PNG file (plot_png.cpp),
// or Cairo's error ("--plot: cairo: ...").
std::expected<std::vector<std::uint8_t>, std::string> png_of(const layout& d);

// The face the PNG's text is drawn in, "family style" as the font file names it ("DejaVu Sans
// Book", bold: "DejaVu Sans Bold"): what fontconfig found for DejaVu Sans, a substitute if it
// is not installed; empty if Cairo's font backend is not FreeType.
std::string png_font(bool bold);

}  // namespace rig::perf::plot
