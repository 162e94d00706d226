// rig-perf --plot: the SVG writer over plot_layout's drawing, and the file writer for both
// formats (plot.hpp).
#include "tools/rig-perf/plot.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <span>
#include <string_view>

#include "tools/rig-perf/plot_layout.hpp"

namespace rig::perf {

namespace {

using namespace plot;

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

std::string colour(std::uint32_t rgb) {
    char b[8];
    std::snprintf(b, sizeof b, "#%06x", static_cast<unsigned>(rgb & 0xffffff));
    return b;
}

std::string text(const label& l) {
    static constexpr const char* anchors[] = {"start", "middle", "end"};
    std::string extra;
    switch (l.r) {
    case role::heading: extra = " font-size=\"16\" font-weight=\"bold\""; break;
    case role::size_tick: extra = " font-size=\"11\""; break;
    default: break;
    }
    if (l.rotate != 0) {
        extra += " transform=\"rotate(" + std::to_string(l.rotate) + " " + num(l.x, 1) + " " + num(l.y, 1) + ")\"";
    }
    return "<text x=\"" + num(l.x, 1) + "\" y=\"" + num(l.y, 1) + "\" text-anchor=\"" +
           anchors[static_cast<int>(l.a)] + "\"" + extra + ">" + esc(l.text) + "</text>\n";
}

std::string line(const segment& s, std::string_view style) {
    return "<line x1=\"" + num(s.x1, 1) + "\" y1=\"" + num(s.y1, 1) + "\" x2=\"" + num(s.x2, 1) + "\" y2=\"" +
           num(s.y2, 1) + "\" " + std::string(style) + "/>\n";
}

std::string stroke(std::uint32_t c, bool dashed) {
    return "stroke=\"" + colour(c) + "\" stroke-width=\"" + num(line_width, 0) + "\"" +
           (dashed ? " stroke-dasharray=\"" + num(dash_on, 0) + " " + num(dash_off, 0) + "\"" : "");
}

std::string svg_of(const layout& d) {
    std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(canvas_w, 0) + "\" height=\"" +
                      num(canvas_h, 0) + "\" viewBox=\"0 0 " + num(canvas_w, 0) + " " + num(canvas_h, 0) +
                      "\" font-family=\"DejaVu Sans, sans-serif\" font-size=\"12\">\n";
    svg += "<rect x=\"0\" y=\"0\" width=\"" + num(canvas_w, 0) + "\" height=\"" + num(canvas_h, 0) +
           "\" fill=\"white\"/>\n";
    svg += "<title>" + esc(d.title) + "</title>\n";
    svg += text(d.heading);
    for (const axis& a : d.axes) {
        svg += "<g class=\"axis\" id=\"" + a.id + "\">\n";
        for (const segment& s : a.grid) {
            svg += line(s, "stroke=\"" + colour(grid_colour) + "\"");
        }
        for (const segment& s : a.marks) {
            svg += line(s, "stroke=\"black\"");
        }
        for (const label& l : a.labels) {
            svg += text(l);
        }
        svg += "</g>\n";
    }
    svg += "<rect x=\"" + num(frame_left, 1) + "\" y=\"" + num(frame_top, 1) + "\" width=\"" +
           num(frame_right - frame_left, 1) + "\" height=\"" + num(frame_bottom - frame_top, 1) +
           "\" fill=\"none\" stroke=\"black\"/>\n";
    for (const series& s : d.lines) {
        std::string points, marks;
        for (const auto& [x, y] : s.points) {
            const std::string px = num(x, 1), py = num(y, 1);
            points += (points.empty() ? "" : " ") + px + "," + py;
            marks += "<circle cx=\"" + px + "\" cy=\"" + py + "\" r=\"" + num(marker_radius, 0) + "\" fill=\"" +
                     colour(s.colour) + "\"/>\n";
        }
        svg += "<g class=\"series\" id=\"" + esc(s.name) + "\">\n";
        svg += "<polyline fill=\"none\" " + stroke(s.colour, s.dashed) + " points=\"" + points + "\"/>\n" + marks;
        svg += "</g>\n";
    }
    svg += "<g class=\"legend\">\n";
    for (const legend_entry& e : d.legend) {
        svg += line(e.sample, stroke(e.colour, e.dashed));
        svg += text(e.name);
    }
    svg += "</g>\n</svg>\n";
    return svg;
}

// Writes bytes to path; on any failure removes what was written and names the reason.
std::expected<void, std::string> write_file(const std::string& path, std::span<const char> bytes) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) {
        return std::unexpected("--plot: cannot write " + path + ": " + std::strerror(errno));
    }
    const std::size_t n = std::fwrite(bytes.data(), 1, bytes.size(), f);
    const int write_errno = errno;
    if (std::fclose(f) != 0 || n != bytes.size()) {
        const int e = n != bytes.size() ? write_errno : errno;
        std::remove(path.c_str());  // no half-written drawing left behind
        return std::unexpected("--plot: cannot write " + path + ": " + std::strerror(e));
    }
    return {};
}

}  // namespace

std::expected<plot_format, std::string> plot_format_of(const std::string& path) {
    std::string lower = path;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const auto named = [&](std::string_view ext) { return lower.size() > ext.size() && lower.ends_with(ext); };
    if (named(".svg")) {
        return plot_format::svg;
    }
    if (named(".png")) {
        return plot_format::png;
    }
    return std::unexpected(std::string("names neither an SVG nor a PNG file (a name ending in .svg or .png)"));
}

std::expected<std::string, std::string> render_plot(const run_report& r, bool report_gbits) {
    auto d = layout_of(r, report_gbits);
    if (!d) {
        return std::unexpected(d.error());
    }
    return svg_of(*d);
}

std::expected<std::vector<std::uint8_t>, std::string> render_png(const run_report& r, bool report_gbits) {
    auto d = layout_of(r, report_gbits);
    if (!d) {
        return std::unexpected(d.error());
    }
    return png_of(*d);
}

std::expected<void, std::string> write_plot(const std::string& path, const run_report& r, bool report_gbits) {
    const auto format = plot_format_of(path);
    if (!format) {
        return std::unexpected("--plot " + path + ": " + format.error());
    }
    if (*format == plot_format::svg) {
        auto svg = render_plot(r, report_gbits);
        if (!svg) {
            return std::unexpected(svg.error());
        }
        return write_file(path, *svg);
    }
    auto png = render_png(r, report_gbits);
    if (!png) {
        return std::unexpected(png.error());
    }
    return write_file(path, std::span<const char>(reinterpret_cast<const char*>(png->data()), png->size()));
}

std::expected<void, std::string> write_layout(const std::string& path, const plot::layout& d) {
    const auto format = plot_format_of(path);
    if (!format) {
        return std::unexpected("--plot " + path + ": " + format.error());
    }
    if (*format == plot_format::svg) {
        return write_file(path, svg_of(d));
    }
    auto png = png_of(d);
    if (!png) {
        return std::unexpected(png.error());
    }
    return write_file(path, std::span<const char>(reinterpret_cast<const char*>(png->data()), png->size()));
}

}  // namespace rig::perf
