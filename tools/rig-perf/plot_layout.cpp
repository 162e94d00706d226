// The drawing of a --plot (plot_layout.hpp): axis ranges and ticks, series points, legend.
#include "tools/rig-perf/plot_layout.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

namespace rig::perf::plot {

namespace {

std::string num(double v, int decimals) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", decimals, v);
    return b;
}

// A value axis: linear from 0 to a round top with about five 1-2-5 steps, or log10 over
// whole decades with ticks at 1, 2 and 5 (latency tails span orders of magnitude).
struct value_axis {
    bool log = false;
    double lo = 0, hi = 1;  // the ends: values, or their log10
    std::vector<std::pair<double, std::string>> ticks;

    static value_axis linear(double max_value) {
        value_axis a;
        if (!(max_value > 0)) {
            max_value = 1;
        }
        const double raw = max_value / 5;
        const double e = std::pow(10.0, std::floor(std::log10(raw)));
        const double m = raw / e;
        const double step = (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * e;
        a.hi = std::ceil(max_value / step - 1e-9) * step;
        const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
        for (int i = 0; i * step <= a.hi + step / 2; ++i) {
            a.ticks.emplace_back(i * step, num(i * step, decimals));
        }
        return a;
    }

    static value_axis logarithmic(double min_value, double max_value) {
        value_axis a;
        a.log = true;
        if (!(max_value > 0)) {
            max_value = 1;
        }
        if (!(min_value > 0)) {
            min_value = max_value;
        }
        a.lo = std::floor(std::log10(min_value));
        a.hi = std::max(std::ceil(std::log10(max_value)), a.lo + 1);
        for (int e = static_cast<int>(a.lo); e <= static_cast<int>(a.hi); ++e) {
            for (const double m : {1.0, 2.0, 5.0}) {
                const double v = m * std::pow(10.0, e);
                if (std::log10(v) <= a.hi + 1e-9) {
                    a.ticks.emplace_back(v, num(v, std::max(0, -e)));
                }
            }
        }
        return a;
    }

    // a value at or below the log axis's bottom (0 included) sits on the bottom
    double y(double v) const {
        const double t = log ? (std::log10(std::max(v, std::pow(10.0, lo))) - lo) / (hi - lo) : (v - lo) / (hi - lo);
        return frame_bottom - t * (frame_bottom - frame_top);
    }
};

// log2 of the size, widened to whole powers of two (one each side for a single size)
struct size_axis {
    int lo = 1, hi = 23;

    explicit size_axis(const std::vector<double>& sizes) {
        const auto [mn, mx] = std::minmax_element(sizes.begin(), sizes.end());
        lo = static_cast<int>(std::floor(std::log2(*mn)));
        hi = static_cast<int>(std::ceil(std::log2(*mx)));
        if (lo == hi) {
            --lo;
            ++hi;
        }
    }
    double x(double bytes) const {
        return frame_left + (std::log2(bytes) - lo) / (hi - lo) * (frame_right - frame_left);
    }
};

// A figure before it is placed: which axis, its values per size.
struct figure {
    std::string name;
    std::uint32_t colour;
    bool right_axis;
    std::vector<double> values;
};

template <class Row>
std::expected<std::vector<double>, std::string> column(const std::vector<Row>& rows, double Row::*field,
                                                       std::string_view name) {
    std::vector<double> out;
    for (const Row& r : rows) {
        const double v = r.*field;
        if (!std::isfinite(v) || v < 0) {
            return std::unexpected("--plot: " + std::string(name) + " of the " + std::to_string(r.bytes) +
                                   "-byte row is " + num(v, 3) + ", not a figure to draw");
        }
        out.push_back(v);
    }
    return out;
}

constexpr double mid_y = (frame_top + frame_bottom) / 2;

axis left_axis(const value_axis& ya, const std::string& name) {
    axis a{"y-left", {}, {}, {}};
    for (const auto& [v, text] : ya.ticks) {
        a.grid.push_back({frame_left, ya.y(v), frame_right, ya.y(v)});
        a.marks.push_back({frame_left - 5, ya.y(v), frame_left, ya.y(v)});
        a.labels.push_back({frame_left - 8, ya.y(v) + 4, text, anchor::end, role::value_tick, 0});
    }
    a.labels.push_back({20, mid_y, name, anchor::middle, role::axis_name, -90});
    return a;
}

axis right_axis(const value_axis& ya, const std::string& name) {
    axis a{"y-right", {}, {}, {}};
    for (const auto& [v, text] : ya.ticks) {
        a.marks.push_back({frame_right, ya.y(v), frame_right + 5, ya.y(v)});
        a.labels.push_back({frame_right + 8, ya.y(v) + 4, text, anchor::start, role::value_tick, 0});
    }
    a.labels.push_back({canvas_w - 20, mid_y, name, anchor::middle, role::axis_name, 90});
    return a;
}

// ticks at every power of two; at most 16 labels, counted from the largest size. `counts`:
// the x values are plain counts (layout_of_curves: "1", "1024"), not byte sizes.
axis x_axis(const size_axis& xs, const std::string& name, bool counts) {
    axis a{"x", {}, {}, {}};
    const int every = std::max(1, (xs.hi - xs.lo + 16) / 16);
    for (int k = xs.lo; k <= xs.hi; ++k) {
        const double b = std::ldexp(1.0, k);
        a.marks.push_back({xs.x(b), frame_bottom, xs.x(b), frame_bottom + 5});
        if ((xs.hi - k) % every == 0) {
            a.labels.push_back({xs.x(b), frame_bottom + 20, counts ? num(b, 0) : size_label(b), anchor::middle,
                                role::size_tick, 0});
        }
    }
    a.labels.push_back({(frame_left + frame_right) / 2, frame_bottom + 50, name, anchor::middle, role::axis_name, 0});
    return a;
}

layout place(const std::string& title, const std::vector<double>& sizes, const std::vector<figure>& figures,
             const std::string& left_name, const std::string& right_name, bool left_log,
             const std::string& x_name = "message size [bytes, log2 scale]", bool x_counts = false) {
    const size_axis xs(sizes);
    double lmax = 0, rmax = 0, lmin_positive = 0;
    for (const figure& f : figures) {
        for (const double v : f.values) {
            double& m = f.right_axis ? rmax : lmax;
            m = std::max(m, v);
            if (!f.right_axis && v > 0 && (lmin_positive == 0 || v < lmin_positive)) {
                lmin_positive = v;
            }
        }
    }
    const value_axis ly = left_log ? value_axis::logarithmic(lmin_positive, lmax) : value_axis::linear(lmax);
    const value_axis ry = value_axis::linear(rmax);

    layout out;
    out.title = title;
    out.heading = {canvas_w / 2, 30, title, anchor::middle, role::heading, 0};
    out.axes.push_back(left_axis(ly, left_name));
    if (!right_name.empty()) {
        out.axes.push_back(right_axis(ry, right_name));
    }
    out.axes.push_back(x_axis(xs, x_name, x_counts));
    for (const figure& f : figures) {
        const value_axis& ya = f.right_axis ? ry : ly;
        series s{f.name, f.colour, f.right_axis, {}};
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            s.points.emplace_back(xs.x(sizes[i]), ya.y(f.values[i]));
        }
        out.lines.push_back(std::move(s));
    }
    // the legend: one row between the title and the frame, centred, where no data can lie
    // (an entry's width allows 7 units a character: more than DejaVu Sans at 12 units averages
    // over these names, digits and capitals included)
    const auto entry_width = [](const series& s) { return 46 + 7 * static_cast<double>(s.name.size()); };
    double legend_width = 0;
    for (const series& s : out.lines) {
        legend_width += entry_width(s);
    }
    double x = (frame_left + frame_right - legend_width) / 2;
    for (const series& s : out.lines) {
        out.legend.push_back({{x, frame_top - 25, x + 30, frame_top - 25},
                              {x + 36, frame_top - 21, s.name, anchor::start, role::legend, 0},
                              s.colour,
                              s.dashed});
        x += entry_width(s);
    }
    return out;
}

}  // namespace

std::string size_label(double bytes) {
    static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB"};
    int u = 0;
    while (bytes >= 1024 && u < 3) {
        bytes /= 1024;
        ++u;
    }
    return num(bytes, bytes == std::floor(bytes) ? 0 : 1) + " " + units[u];
}

std::expected<layout, std::string> layout_of(const run_report& r, bool report_gbits) {
    const bool lat = is_latency(r.kind);
    std::vector<double> sizes;
    if (lat) {
        for (const lat_row& row : r.lat) {
            sizes.push_back(static_cast<double>(row.bytes));
        }
    } else {
        for (const bw_row& row : r.bw) {
            sizes.push_back(static_cast<double>(row.bytes));
        }
    }
    if (sizes.empty()) {
        return std::unexpected("--plot: the report has no " + std::string(lat ? "latency" : "bandwidth") +
                               " rows to draw");
    }
    if (std::any_of(sizes.begin(), sizes.end(), [](double b) { return b < 1; })) {
        return std::unexpected(std::string("--plot: a row has a message size of 0 bytes"));
    }
    std::vector<figure> figures;
    const std::string title = test_title(r.kind);
    if (lat) {
        const std::pair<double lat_row::*, std::pair<const char*, std::uint32_t>> cols[] = {
            {&lat_row::t_min, {"t_min", 0x2ca02c}},
            {&lat_row::t_typical, {"t_typical", 0x1f77b4}},
            {&lat_row::p99, {"99% percentile", 0xff7f0e}},
            {&lat_row::p999, {"99.9% percentile", 0xd62728}},
        };
        for (const auto& [field, name_colour] : cols) {
            auto v = column(r.lat, field, name_colour.first);
            if (!v) {
                return std::unexpected(v.error());
            }
            figures.push_back({name_colour.first, name_colour.second, false, std::move(*v)});
        }
        return place(title + ": latency against message size", sizes, figures, "latency [usec, log10 scale]", "",
                     true);
    }
    auto bw = column(r.bw, &bw_row::bw_average_mib, "BW average");
    auto rate = column(r.bw, &bw_row::msg_rate_mpps, "MsgRate");
    if (!bw || !rate) {
        return std::unexpected(!bw ? bw.error() : rate.error());
    }
    if (report_gbits) {  // perftest's --report_gbits: 10^9 bit/s from 2^20 B/s
        for (double& v : *bw) {
            v = v * 1048576.0 * 8 / 1e9;
        }
    }
    const std::string unit = report_gbits ? "Gb/sec" : "MiB/sec";
    figures.push_back({"BW average [" + unit + "]", 0x1f77b4, false, std::move(*bw)});
    figures.push_back({"MsgRate [Mpps]", 0xd62728, true, std::move(*rate)});
    return place(title + ": bandwidth and message rate against message size", sizes, figures,
                 "BW average [" + unit + "]", "MsgRate [Mpps]", false);
}

std::expected<layout, std::string> layout_of_curves(const std::string& title, const std::string& x_name,
                                                    const std::vector<double>& xs, const std::vector<curve>& curves,
                                                    const std::string& left_name, const std::string& right_name) {
    if (xs.empty() || std::any_of(xs.begin(), xs.end(), [](double x) { return !(x >= 1) || !std::isfinite(x); })) {
        return std::unexpected(std::string("--plot: the x values must be counts of at least 1"));
    }
    std::vector<figure> figures;
    for (const curve& c : curves) {
        if (c.values.size() != xs.size() ||
            std::any_of(c.values.begin(), c.values.end(), [](double v) { return !std::isfinite(v) || v < 0; })) {
            return std::unexpected("--plot: " + c.name + " has no finite, non-negative figure for every x");
        }
        figures.push_back({c.name, c.colour, c.right_axis, c.values});
    }
    return place(title, xs, figures, left_name, right_name, false, x_name, true);
}

}  // namespace rig::perf::plot
