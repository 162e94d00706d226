// The rasterizer (raster.hpp).
#include "tools/rig-perf/raster.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "tools/rig-perf/font.hpp"

namespace rig::perf::raster {

canvas::canvas(int width, int height, rgb background) : _w(width), _h(height) {
    if (width <= 0 || height <= 0) {
        throw std::invalid_argument("raster: a canvas of " + std::to_string(width) + " x " + std::to_string(height) +
                                    " pixels");
    }
    _px.resize(static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 3);
    for (std::size_t i = 0; i < _px.size(); i += 3) {
        _px[i] = background.r;
        _px[i + 1] = background.g;
        _px[i + 2] = background.b;
    }
}

rgb canvas::at(int x, int y) const {
    if (x < 0 || y < 0 || x >= _w || y >= _h) {
        throw std::out_of_range("raster: pixel (" + std::to_string(x) + ", " + std::to_string(y) + ") outside " +
                                std::to_string(_w) + " x " + std::to_string(_h));
    }
    const std::size_t i = (static_cast<std::size_t>(y) * static_cast<std::size_t>(_w) + static_cast<std::size_t>(x)) * 3;
    return {_px[i], _px[i + 1], _px[i + 2]};
}

void canvas::set(int x, int y, rgb c) noexcept {
    if (x < 0 || y < 0 || x >= _w || y >= _h) {
        return;
    }
    const std::size_t i = (static_cast<std::size_t>(y) * static_cast<std::size_t>(_w) + static_cast<std::size_t>(x)) * 3;
    _px[i] = c.r;
    _px[i + 1] = c.g;
    _px[i + 2] = c.b;
}

void canvas::fill_rect(double x, double y, double w, double h, rgb c) noexcept {
    const int x0 = static_cast<int>(std::floor(x)), y0 = static_cast<int>(std::floor(y));
    const int x1 = static_cast<int>(std::floor(x + w)), y1 = static_cast<int>(std::floor(y + h));
    for (int j = y0; j < y1; ++j) {
        for (int i = x0; i < x1; ++i) {
            set(i, j, c);
        }
    }
}

void canvas::line(double x1, double y1, double x2, double y2, int width, rgb c, double dash, double gap,
                  double* phase) noexcept {
    // Walk the segment in steps of at most half a pixel and ink a width x width square at each
    // point: its first pixel is floor(p - width / 2 + 1/2), so that width 1 inks the pixel the
    // point lies in and width 2 the two it straddles.
    const double dx = x2 - x1, dy = y2 - y1;
    const double length = std::hypot(dx, dy);
    const int steps = std::max(1, static_cast<int>(std::ceil(length * 2)));
    const double start = phase != nullptr ? *phase : 0;
    const double offset = width / 2.0 - 0.5;
    for (int s = 0; s <= steps; ++s) {
        const double t = static_cast<double>(s) / steps;
        if (dash > 0) {
            const double along = std::fmod(start + t * length, dash + gap);
            if (along >= dash) {
                continue;  // in a gap
            }
        }
        const int px = static_cast<int>(std::floor(x1 + t * dx - offset));
        const int py = static_cast<int>(std::floor(y1 + t * dy - offset));
        for (int j = 0; j < width; ++j) {
            for (int i = 0; i < width; ++i) {
                set(px + i, py + j, c);
            }
        }
    }
    if (phase != nullptr) {
        *phase = start + length;
    }
}

void canvas::disc(double cx, double cy, double radius, rgb c) noexcept {
    // the pixels whose centres lie within the radius
    const int x0 = static_cast<int>(std::floor(cx - radius)), x1 = static_cast<int>(std::ceil(cx + radius));
    const int y0 = static_cast<int>(std::floor(cy - radius)), y1 = static_cast<int>(std::ceil(cy + radius));
    for (int j = y0; j <= y1; ++j) {
        for (int i = x0; i <= x1; ++i) {
            const double ex = i + 0.5 - cx, ey = j + 0.5 - cy;
            if (ex * ex + ey * ey <= radius * radius) {
                set(i, j, c);
            }
        }
    }
}

void canvas::text(double x, double y, std::string_view s, int scale, anchor a, turn t, rgb c, bool bold) noexcept {
    const int w = font::text_width(s.size(), scale) + (bold ? 1 : 0);
    // u runs along the text from its anchor, v across it (negative: above the baseline)
    int pen = a == anchor::start ? 0 : a == anchor::middle ? -w / 2 : -w;
    const int ox = static_cast<int>(std::lround(x)), oy = static_cast<int>(std::lround(y));
    auto ink = [&](int u, int v) {
        switch (t) {
        case turn::none: set(ox + u, oy + v, c); break;
        case turn::up: set(ox + v, oy - u - 1, c); break;    // reads bottom to top, tops to the left
        case turn::down: set(ox - v - 1, oy + u, c); break;  // reads top to bottom, tops to the right
        }
    };
    for (const char ch : s) {
        const font::glyph& g = font::glyph_of(ch);
        for (int row = 0; row < font::glyph_height; ++row) {
            for (int col = 0; col < font::glyph_width; ++col) {
                if ((g[static_cast<std::size_t>(row)] >> (font::glyph_width - 1 - col) & 1) == 0) {
                    continue;
                }
                for (int j = 0; j < scale; ++j) {
                    for (int i = 0; i < scale; ++i) {
                        const int u = pen + col * scale + i;
                        const int v = (row - font::glyph_height) * scale + j;
                        ink(u, v);
                        if (bold) {
                            ink(u + 1, v);
                        }
                    }
                }
            }
        }
        pen += font::advance * scale;
    }
}

}  // namespace rig::perf::raster
