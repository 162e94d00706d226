#pragma once
// A small RGB rasterizer for rig-perf's PNG plots (plot_png.cpp): a canvas of 8-bit RGB
// pixels, and the few primitives a plot needs: lines of a given width (optionally dashed),
// filled discs and rectangles, and text in font.hpp's bitmap font, upright or turned a quarter
// turn. Coordinates are those of the SVG drawing (plot_layout.hpp): pixel (i, j) covers
// [i, i + 1) x [j, j + 1), so a 1-wide line at y = 80 inks row 80, and a 2-wide one rows 79-80.
// No anti-aliasing: the pixels are exactly the colours drawn, which the tests rely on.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace rig::perf::raster {

struct rgb {
    std::uint8_t r = 0, g = 0, b = 0;
    friend bool operator==(const rgb&, const rgb&) = default;
};
constexpr rgb rgb_of(std::uint32_t hex) noexcept {  // 0xRRGGBB
    return {static_cast<std::uint8_t>(hex >> 16), static_cast<std::uint8_t>(hex >> 8), static_cast<std::uint8_t>(hex)};
}

enum class anchor : std::uint8_t { start, middle, end };
// Upright, or a quarter turn: `up` reads bottom to top (SVG rotate(-90)), `down` top to bottom
// (rotate(90)).
enum class turn : std::uint8_t { none, up, down };

class canvas {
public:
    // width x height pixels of `background`; throws std::invalid_argument for an empty size.
    canvas(int width, int height, rgb background);

    int width() const noexcept { return _w; }
    int height() const noexcept { return _h; }
    rgb at(int x, int y) const;  // throws std::out_of_range outside
    std::span<const std::uint8_t> pixels() const noexcept { return _px; }  // rows of RGB, top first

    // Pixels outside the canvas are dropped by every primitive.
    void set(int x, int y, rgb c) noexcept;
    void fill_rect(double x, double y, double w, double h, rgb c) noexcept;
    // A line from (x1, y1) to (x2, y2), `width` pixels wide. `dash` > 0: dashes of `dash`
    // pixels with gaps of `gap`, the pattern continuing from *phase (the length drawn so far
    // along a polyline), which it advances.
    void line(double x1, double y1, double x2, double y2, int width, rgb c, double dash = 0, double gap = 0,
              double* phase = nullptr) noexcept;
    void disc(double cx, double cy, double radius, rgb c) noexcept;
    // `text` with its baseline through (x, y) (for a turned text, the point the rotation is
    // about), anchored there by its start, middle or end; each font pixel `scale` x `scale`;
    // `bold` inks each column twice (shifted by one pixel along the text).
    void text(double x, double y, std::string_view text, int scale, anchor a, turn t, rgb c, bool bold = false) noexcept;

private:
    int _w, _h;
    std::vector<std::uint8_t> _px;
};

}  // namespace rig::perf::raster
