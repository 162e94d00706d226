// rig-perf --plot FILE.png: plot_layout's drawing rasterized (raster.hpp) and encoded
// (png.hpp). The same primitives as the SVG, in its order: background, heading, axes (grid,
// tick marks, labels), frame, each series (its line, then its point markers), legend.
// Fonts: the heading at twice the font's size in bold, axis names at twice, ticks and the
// legend at the font's own 5 x 7 pixels (what fits up to 16 size labels under the frame).
#include <cmath>

#include "tools/rig-perf/plot_layout.hpp"
#include "tools/rig-perf/png.hpp"
#include "tools/rig-perf/raster.hpp"

namespace rig::perf::plot {

namespace {

using raster::rgb_of;

constexpr raster::rgb white = rgb_of(0xffffff);
constexpr raster::rgb black = rgb_of(0x000000);

void draw(raster::canvas& c, const label& l) {
    const int scale = l.r == role::heading || l.r == role::axis_name ? 2 : 1;
    const raster::anchor a = l.a == anchor::start ? raster::anchor::start
                             : l.a == anchor::middle ? raster::anchor::middle
                                                     : raster::anchor::end;
    const raster::turn t = l.rotate < 0 ? raster::turn::up : l.rotate > 0 ? raster::turn::down : raster::turn::none;
    c.text(l.x, l.y, l.text, scale, a, t, black, l.r == role::heading);
}

void draw(raster::canvas& c, const segment& s, int width, raster::rgb colour) {
    c.line(s.x1, s.y1, s.x2, s.y2, width, colour);
}

}  // namespace

std::vector<std::uint8_t> png_of(const layout& d) {
    raster::canvas c(static_cast<int>(canvas_w), static_cast<int>(canvas_h), white);
    draw(c, d.heading);
    for (const axis& a : d.axes) {
        for (const segment& s : a.grid) {
            draw(c, s, 1, rgb_of(grid_colour));
        }
        for (const segment& s : a.marks) {
            draw(c, s, 1, black);
        }
        for (const label& l : a.labels) {
            draw(c, l);
        }
    }
    const segment frame[] = {{frame_left, frame_top, frame_right, frame_top},
                             {frame_right, frame_top, frame_right, frame_bottom},
                             {frame_right, frame_bottom, frame_left, frame_bottom},
                             {frame_left, frame_bottom, frame_left, frame_top}};
    for (const segment& s : frame) {
        draw(c, s, 1, black);
    }
    const int width = static_cast<int>(line_width);
    for (const series& s : d.lines) {
        const raster::rgb col = rgb_of(s.colour);
        double phase = 0;  // the dash pattern runs on along the polyline, as SVG's does
        for (std::size_t i = 1; i < s.points.size(); ++i) {
            const auto [x1, y1] = s.points[i - 1];
            const auto [x2, y2] = s.points[i];
            c.line(x1, y1, x2, y2, width, col, s.dashed ? dash_on : 0, dash_off, &phase);
        }
        for (const auto& [x, y] : s.points) {
            c.disc(x, y, marker_radius, col);
        }
    }
    for (const legend_entry& e : d.legend) {
        double phase = 0;
        c.line(e.sample.x1, e.sample.y1, e.sample.x2, e.sample.y2, width, rgb_of(e.colour), e.dashed ? dash_on : 0,
               dash_off, &phase);
        draw(c, e.name);
    }
    return png::encode_rgb(static_cast<std::uint32_t>(c.width()), static_cast<std::uint32_t>(c.height()), c.pixels());
}

}  // namespace rig::perf::plot
