#pragma once
// A 5 x 7 pixel bitmap font for the labels of rig-perf's PNG plots (plot_png.cpp), drawn by
// hand in the style of the classic HD44780 character LCD cell: digits, upper- and lower-case
// letters and the punctuation the plots print (space . , : ; _ - + = / % ( ) [ ] # ' ! ? < >).
// Glyphs sit on the baseline in a 5-wide cell and advance 6 columns (a column of space).
// Lower-case descenders (g j p q y) are raised into the cell, as on the LCD.
#include <array>
#include <cstdint>

namespace rig::perf::font {

constexpr int glyph_width = 5;
constexpr int glyph_height = 7;
constexpr int advance = 6;

// The rows of one glyph, top first; bit 4 is the leftmost column.
using glyph = std::array<std::uint8_t, glyph_height>;

// The glyph of `c`; a character the font lacks draws as a hollow box (so it shows, rather
// than vanishing).
const glyph& glyph_of(char c) noexcept;
// Does the font draw `c` (rather than the box)?
bool has_glyph(char c) noexcept;

// The width in pixels of `n` characters at `scale` (the last one's trailing space left out).
constexpr int text_width(std::size_t n, int scale) noexcept {
    return n == 0 ? 0 : (static_cast<int>(n) * advance - 1) * scale;
}

}  // namespace rig::perf::font
