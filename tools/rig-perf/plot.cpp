// rig-perf --plot: SVG written by hand. One frame (title, log2 size axis, one or two linear y
// axes with 1-2-5 ticks, legend) and a polyline with point markers per series.
#include "plot.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

namespace rig::perf {

namespace {

// the drawing area inside a 900 × 520 canvas; the right margin holds the second axis
constexpr double canvas_w = 900, canvas_h = 520;
constexpr double left = 90, right = 810, top = 80, bottom = 440;

std::string num(double v, int decimals) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", decimals, v);
    return b;
}

std::string esc(std::string_view s) {
    std::string out;
    for (const char c : s) {
        switch (c) {
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '&': out += "&amp;"; break;
        case '"': out += "&quot;"; break;
        default: out += c;
        }
    }
    return out;
}

// "2 B", "64 KiB", "8 MiB": a power of two in the largest binary unit it fills
std::string size_label(double bytes) {
    static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB"};
    int u = 0;
    while (bytes >= 1024 && u < 3) {
        bytes /= 1024;
        ++u;
    }
    return num(bytes, bytes == std::floor(bytes) ? 0 : 1) + " " + units[u];
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
        return bottom - t * (bottom - top);
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
    double x(double bytes) const { return left + (std::log2(bytes) - lo) / (hi - lo) * (right - left); }
};

struct series {
    std::string name;
    std::string colour;
    bool dashed = false;
    bool right_axis = false;
    std::vector<double> values;  // one per size
};

std::string test_title(test_kind k) {
    switch (k) {
    case test_kind::write_bw: return "RDMA_Write BW Test";
    case test_kind::write_lat: return "RDMA_Write Latency Test";
    case test_kind::read_bw: return "RDMA_Read BW Test";
    case test_kind::read_lat: return "RDMA_Read Latency Test";
    case test_kind::send_bw: return "Send BW Test";
    case test_kind::send_lat: return "Send Latency Test";
    }
    return "rig-perf";
}

std::string text(double x, double y, std::string_view s, std::string_view anchor, std::string_view extra = {}) {
    return "<text x=\"" + num(x, 1) + "\" y=\"" + num(y, 1) + "\" text-anchor=\"" + std::string(anchor) + "\"" +
           (extra.empty() ? "" : " " + std::string(extra)) + ">" + esc(s) + "</text>\n";
}

std::string line(double x1, double y1, double x2, double y2, std::string_view style) {
    return "<line x1=\"" + num(x1, 1) + "\" y1=\"" + num(y1, 1) + "\" x2=\"" + num(x2, 1) + "\" y2=\"" + num(y2, 1) +
           "\" " + std::string(style) + "/>\n";
}

std::string draw(const std::string& title, const std::vector<double>& sizes, const std::vector<series>& all,
                 const std::string& left_label, const std::string& right_label, bool left_log) {
    const size_axis xs(sizes);
    double lmax = 0, rmax = 0;
    double lmin_positive = 0;
    for (const series& s : all) {
        for (const double v : s.values) {
            double& m = s.right_axis ? rmax : lmax;
            m = std::max(m, v);
            if (!s.right_axis && v > 0 && (lmin_positive == 0 || v < lmin_positive)) {
                lmin_positive = v;
            }
        }
    }
    const value_axis ly = left_log ? value_axis::logarithmic(lmin_positive, lmax) : value_axis::linear(lmax);
    const value_axis ry = value_axis::linear(rmax);

    std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(canvas_w, 0) + "\" height=\"" +
                      num(canvas_h, 0) + "\" viewBox=\"0 0 " + num(canvas_w, 0) + " " + num(canvas_h, 0) +
                      "\" font-family=\"sans-serif\" font-size=\"12\">\n";
    svg += "<rect x=\"0\" y=\"0\" width=\"" + num(canvas_w, 0) + "\" height=\"" + num(canvas_h, 0) +
           "\" fill=\"white\"/>\n";
    svg += "<title>" + esc(title) + "</title>\n";
    svg += text(canvas_w / 2, 30, title, "middle", "font-size=\"16\" font-weight=\"bold\"");

    // grid and left ticks
    svg += "<g class=\"axis\" id=\"y-left\">\n";
    for (const auto& [v, label] : ly.ticks) {
        svg += line(left, ly.y(v), right, ly.y(v), "stroke=\"#e0e0e0\"");
        svg += line(left - 5, ly.y(v), left, ly.y(v), "stroke=\"black\"");
        svg += text(left - 8, ly.y(v) + 4, label, "end");
    }
    svg += text(20, (top + bottom) / 2, left_label, "middle",
                "transform=\"rotate(-90 20 " + num((top + bottom) / 2, 1) + ")\"");
    svg += "</g>\n";
    if (!right_label.empty()) {
        svg += "<g class=\"axis\" id=\"y-right\">\n";
        for (const auto& [v, label] : ry.ticks) {
            svg += line(right, ry.y(v), right + 5, ry.y(v), "stroke=\"black\"");
            svg += text(right + 8, ry.y(v) + 4, label, "start");
        }
        svg += text(canvas_w - 20, (top + bottom) / 2, right_label, "middle",
                    "transform=\"rotate(90 " + num(canvas_w - 20, 1) + " " + num((top + bottom) / 2, 1) + ")\"");
        svg += "</g>\n";
    }

    // x ticks at every power of two; at most 16 labels, counted from the largest size
    svg += "<g class=\"axis\" id=\"x\">\n";
    const int every = std::max(1, (xs.hi - xs.lo + 16) / 16);
    for (int k = xs.lo; k <= xs.hi; ++k) {
        const double b = std::ldexp(1.0, k);
        svg += line(xs.x(b), bottom, xs.x(b), bottom + 5, "stroke=\"black\"");
        if ((xs.hi - k) % every == 0) {
            svg += text(xs.x(b), bottom + 20, size_label(b), "middle", "font-size=\"11\"");
        }
    }
    svg += text((left + right) / 2, bottom + 50, "message size [bytes, log2 scale]", "middle");
    svg += "</g>\n";
    svg += "<rect x=\"" + num(left, 1) + "\" y=\"" + num(top, 1) + "\" width=\"" + num(right - left, 1) +
           "\" height=\"" + num(bottom - top, 1) + "\" fill=\"none\" stroke=\"black\"/>\n";

    // the series, then the legend
    for (const series& s : all) {
        const value_axis& ya = s.right_axis ? ry : ly;
        std::string points;
        std::string marks;
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            const std::string px = num(xs.x(sizes[i]), 1);
            const std::string py = num(ya.y(s.values[i]), 1);
            points += (i == 0 ? "" : " ") + px + "," + py;
            marks += "<circle cx=\"" + px + "\" cy=\"" + py + "\" r=\"3\" fill=\"" + s.colour + "\"/>\n";
        }
        svg += "<g class=\"series\" id=\"" + esc(s.name) + "\">\n";
        svg += "<polyline fill=\"none\" stroke=\"" + s.colour + "\" stroke-width=\"2\"" +
               (s.dashed ? " stroke-dasharray=\"6 4\"" : "") + " points=\"" + points + "\"/>\n" + marks;
        svg += "</g>\n";
    }
    // the legend: one row between the title and the frame, centred, where no data can lie
    const auto item_width = [](const series& s) { return 46 + 7 * static_cast<double>(s.name.size()); };
    double legend_width = 0;
    for (const series& s : all) {
        legend_width += item_width(s);
    }
    double x = (left + right - legend_width) / 2;
    svg += "<g class=\"legend\">\n";
    for (const series& s : all) {
        svg += line(x, top - 25, x + 30, top - 25,
                    "stroke=\"" + s.colour + "\" stroke-width=\"2\"" + (s.dashed ? " stroke-dasharray=\"6 4\"" : ""));
        svg += text(x + 36, top - 21, s.name, "start");
        x += item_width(s);
    }
    svg += "</g>\n</svg>\n";
    return svg;
}

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

}  // namespace

std::expected<std::string, std::string> render_plot(const run_report& r, bool report_gbits) {
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
    std::vector<series> all;
    const std::string title = test_title(r.kind);
    if (lat) {
        const std::pair<double lat_row::*, std::pair<const char*, const char*>> cols[] = {
            {&lat_row::t_min, {"t_min", "#2ca02c"}},
            {&lat_row::t_typical, {"t_typical", "#1f77b4"}},
            {&lat_row::p99, {"99% percentile", "#ff7f0e"}},
            {&lat_row::p999, {"99.9% percentile", "#d62728"}},
        };
        for (const auto& [field, name_colour] : cols) {
            auto v = column(r.lat, field, name_colour.first);
            if (!v) {
                return std::unexpected(v.error());
            }
            all.push_back({name_colour.first, name_colour.second, false, false, std::move(*v)});
        }
        return draw(title + ": latency against message size", sizes, all, "latency [usec, log10 scale]", "", true);
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
    all.push_back({"BW average [" + unit + "]", "#1f77b4", false, false, std::move(*bw)});
    all.push_back({"MsgRate [Mpps]", "#d62728", true, true, std::move(*rate)});
    return draw(title + ": bandwidth and message rate against message size", sizes, all,
                "BW average [" + unit + "]", "MsgRate [Mpps]", false);
}

std::expected<void, std::string> write_plot(const std::string& path, const run_report& r, bool report_gbits) {
    if (!path.ends_with(".svg")) {
        return std::unexpected("--plot: only SVG is written (" + path + ")");
    }
    auto svg = render_plot(r, report_gbits);
    if (!svg) {
        return std::unexpected(svg.error());
    }
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
        return std::unexpected("--plot: cannot write " + path + ": " + std::strerror(errno));
    }
    const std::size_t n = std::fwrite(svg->data(), 1, svg->size(), f);
    const int write_errno = errno;
    if (std::fclose(f) != 0 || n != svg->size()) {
        const int e = n != svg->size() ? write_errno : errno;
        std::remove(path.c_str());  // no half-written drawing left behind
        return std::unexpected("--plot: cannot write " + path + ": " + std::strerror(e));
    }
    return {};
}

}  // namespace rig::perf
