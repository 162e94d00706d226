// rig-perf --plot FILE.png (tools/rig-perf/plot.hpp, plot_png.cpp): the PNG is read back by
// Cairo's own PNG reader (cairo_image_surface_create_from_png_stream) and its pixels checked
// against the data: each series' colour where its points lie, the frame, the grid, the dashes
// of the message-rate line, the text where the layout puts it, in DejaVu Sans, anti-aliased. A
// file name of another format is refused and nothing is written.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <cairo.h>

#include <catch2/catch.hpp>

#include "test/temp_dir.hpp"
#include "tools/rig-perf/plot.hpp"
#include "tools/rig-perf/plot_layout.hpp"

namespace {

namespace perf = rig::perf;
using bytes = std::vector<std::uint8_t>;

// ---- the PNG read back

struct image {
    int width = 0, height = 0;
    std::vector<std::uint32_t> px;  // 0xRRGGBB, rows top first

    std::uint32_t at(int x, int y) const {
        if (x < 0 || x >= width || y < 0 || y >= height) {
            FAIL("pixel (" << x << ", " << y << ") outside the " << width << " x " << height << " image");
        }
        return px[static_cast<std::size_t>(y) * static_cast<std::size_t>(width) + static_cast<std::size_t>(x)];
    }
};

image decode(const bytes& f) {
    // the file itself: PNG's signature, then IHDR saying 8-bit truecolour without alpha
    static const bytes signature{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    REQUIRE(f.size() > 33);
    REQUIRE(bytes(f.begin(), f.begin() + 8) == signature);
    CHECK(std::string(f.begin() + 12, f.begin() + 16) == "IHDR");
    CHECK(f[24] == 8);  // bit depth
    CHECK(f[25] == 2);  // colour type: truecolour

    struct reader {
        const bytes* f;
        std::size_t at = 0;
    } r{&f};
    const auto read = [](void* closure, unsigned char* data, unsigned int n) {
        auto* from = static_cast<reader*>(closure);
        if (from->at + n > from->f->size()) {
            return CAIRO_STATUS_READ_ERROR;
        }
        std::memcpy(data, from->f->data() + from->at, n);
        from->at += n;
        return CAIRO_STATUS_SUCCESS;
    };
    const std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> s(
        cairo_image_surface_create_from_png_stream(read, &r), cairo_surface_destroy);
    REQUIRE(cairo_surface_status(s.get()) == CAIRO_STATUS_SUCCESS);
    REQUIRE(cairo_image_surface_get_format(s.get()) == CAIRO_FORMAT_RGB24);
    cairo_surface_flush(s.get());
    image img;
    img.width = cairo_image_surface_get_width(s.get());
    img.height = cairo_image_surface_get_height(s.get());
    const int stride = cairo_image_surface_get_stride(s.get());
    const unsigned char* data = cairo_image_surface_get_data(s.get());
    for (int y = 0; y < img.height; ++y) {
        for (int x = 0; x < img.width; ++x) {
            std::uint32_t p = 0;
            std::memcpy(&p, data + static_cast<std::ptrdiff_t>(y) * stride + x * 4, 4);  // native-endian xRGB
            img.px.push_back(p & 0xffffff);
        }
    }
    return img;
}

int channel(std::uint32_t c, int i) { return static_cast<int>((c >> (16 - 8 * i)) & 0xff); }

// How much of `colour` covers a pixel drawn on white: 0 white, 1 the colour itself (the
// least-squares blend factor over the three channels).
double coverage(std::uint32_t pixel, std::uint32_t colour) {
    double num = 0, den = 0;
    for (int i = 0; i < 3; ++i) {
        const double d = 255 - channel(colour, i);
        num += (255 - channel(pixel, i)) * d;
        den += d * d;
    }
    return num / den;
}

// Is `colour`, anti-aliased on white, what covers the pixel (the blend fits every channel)?
bool tinted(std::uint32_t pixel, std::uint32_t colour) {
    const double a = coverage(pixel, colour);
    for (int i = 0; i < 3; ++i) {
        const double want = 255 - a * (255 - channel(colour, i));
        if (std::abs(channel(pixel, i) - want) > 24) {
            return false;
        }
    }
    return true;
}

// The colour solid (at least 90 % of the way from white) in a pixel near (x, y)?
bool near(const image& img, double x, double y, std::uint32_t colour, int reach = 2) {
    for (int dy = -reach; dy <= reach; ++dy) {
        for (int dx = -reach; dx <= reach; ++dx) {
            const std::uint32_t p = img.at(static_cast<int>(std::floor(x)) + dx, static_cast<int>(std::floor(y)) + dy);
            if (tinted(p, colour) && coverage(p, colour) > 0.9) {
                return true;
            }
        }
    }
    return false;
}

// The box of dark pixels (every channel under 128: text is black) in [x0, x1) x [y0, y1).
struct ink_box {
    int n = 0, grey = 0;  // dark pixels, and pixels between black and white (anti-aliasing)
    int left = 1 << 30, right = -1, top = 1 << 30, bottom = -1;
};
ink_box ink(const image& img, int x0, int y0, int x1, int y1) {
    ink_box b;
    for (int y = y0; y < y1; ++y) {
        for (int x = x0; x < x1; ++x) {
            const std::uint32_t p = img.at(x, y);
            const bool grey_level = channel(p, 0) == channel(p, 1) && channel(p, 1) == channel(p, 2);
            if (grey_level && channel(p, 0) < 128) {
                ++b.n;
                b.left = std::min(b.left, x);
                b.right = std::max(b.right, x);
                b.top = std::min(b.top, y);
                b.bottom = std::max(b.bottom, y);
            }
            if (grey_level && channel(p, 0) > 0x20 && channel(p, 0) < 0xd0) {
                ++b.grey;
            }
        }
    }
    return b;
}

// ---- the reports drawn

constexpr std::uint32_t bw_blue = 0x1f77b4, rate_red = 0xd62728, white = 0xffffff, black = 0, grid = 0xe0e0e0;

// 2 B .. 1 KiB (x axis 2^1 .. 2^10); BW average 400 (k / 10)^2 MiB/s: its axis 0 .. 400 in
// steps of 100; the rate 0.9 - 0.08 k Mpps: its axis 0 .. 1.0 in steps of 0.2
perf::run_report bw_report() {
    perf::run_report r;
    r.kind = perf::test_kind::write_bw;
    for (int k = 1; k <= 10; ++k) {
        const double bw = 400.0 * k * k / 100;
        r.bw.push_back({std::uint64_t{1} << k, 1000, bw, bw, 0.9 - 0.08 * k});
    }
    return r;
}

double x_of_log2(int k) { return 90 + (k - 1) / 9.0 * 720; }
double y_linear(double v, double top) { return 440 - v / top * 360; }
int px(double v) { return static_cast<int>(std::floor(v)); }

bytes slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return bytes(std::istreambuf_iterator<char>(f), {});
}

using rig::test::temp_dir;

}  // namespace

TEST_CASE("png: the text is DejaVu Sans (fonts-dejavu-core), found through fontconfig", "[unit][perf][plot]") {
    CHECK(perf::plot::png_font(false) == "DejaVu Sans Book");
    CHECK(perf::plot::png_font(true) == "DejaVu Sans Bold");
}

TEST_CASE("png: a bandwidth plot shows each series' colour where its points lie", "[unit][perf][plot]") {
    const perf::run_report r = bw_report();
    auto f = perf::render_png(r);
    REQUIRE(f.has_value());
    const image img = decode(*f);
    REQUIRE(img.width == 900);
    REQUIRE(img.height == 520);
    CHECK(img.at(0, 0) == white);
    CHECK(img.at(899, 519) == white);
    CHECK(img.at(90, 80) == black);     // the frame's corners, one crisp pixel wide
    CHECK(img.at(810, 440) == black);
    CHECK(img.at(450, 440) == black);   // its bottom edge
    CHECK(img.at(450, 441) == white);
    CHECK(img.at(450, 439) != black);
    CHECK(img.at(85, px(y_linear(300, 400))) == black);  // the left tick mark of 300 MiB/s
    CHECK(img.at(300, px(y_linear(300, 400))) == grid);  // and its grid line, clear of the data here
    int checked = 0;
    for (int k = 1; k <= 10; ++k) {
        const double x = x_of_log2(k);
        const double y_bw = y_linear(400.0 * k * k / 100, 400);
        const double y_rate = y_linear(0.9 - 0.08 * k, 1.0);
        if (std::abs(y_bw - y_rate) < 10) {
            continue;  // where the lines cross, the later one is on top
        }
        INFO("size 2^" << k);
        CHECK(img.at(px(x), px(y_bw)) == bw_blue);  // the point's marker, solid at its centre
        CHECK(img.at(px(x), px(y_rate)) == rate_red);
        CHECK(img.at(px(x), px(y_bw) + 8) != bw_blue);  // and not a blur of it
        ++checked;
    }
    CHECK(checked >= 8);
    // the BW line is solid: its colour midway between the first two points
    CHECK(near(img, (x_of_log2(1) + x_of_log2(2)) / 2, (y_linear(4, 400) + y_linear(16, 400)) / 2, bw_blue));
    // the rate line is dashed: along its segment from 64 B to 128 B, red and gaps
    int red = 0, gap = 0;
    for (int i = 8; i <= 72; ++i) {
        const double t = i / 80.0;
        const double x = x_of_log2(6) + t * (x_of_log2(7) - x_of_log2(6));
        const double y = y_linear(0.9 - 0.08 * (6 + t), 1.0);
        const std::uint32_t p = img.at(px(x), px(y));
        red += tinted(p, rate_red) && coverage(p, rate_red) > 0.5 ? 1 : 0;
        gap += p == white ? 1 : 0;
    }
    CHECK(red > 20);
    CHECK(gap > 10);
    // the heading: ink on white above the legend, centred on the canvas, in an anti-aliased
    // font (grey levels between black and white: no bitmap font)
    const ink_box heading = ink(img, 0, 10, 900, 36);
    CHECK(heading.n > 500);
    CHECK(heading.grey > 200);
    CHECK((heading.left + heading.right) / 2.0 == Approx(450).margin(3));
    CHECK(heading.right - heading.left > 400);  // some 70 characters of 16 px
    // the left axis's name reads upward along the left edge (rotated: taller than wide), the
    // right one's along the right edge, both centred on the frame's height
    const ink_box left = ink(img, 0, 80, 30, 440);
    CHECK(left.bottom - left.top > 3 * (left.right - left.left));
    CHECK((left.top + left.bottom) / 2.0 == Approx(260).margin(3));
    const ink_box right = ink(img, 870, 80, 900, 440);
    CHECK(right.bottom - right.top > 3 * (right.right - right.left));
    CHECK((right.top + right.bottom) / 2.0 == Approx(260).margin(3));
    // the size ticks' labels under the frame, the first ("2 B") centred on its tick at x = 90
    const ink_box first_size = ink(img, 70, 445, 111, 466);
    CHECK(first_size.n > 10);
    CHECK((first_size.left + first_size.right) / 2.0 == Approx(90).margin(3));
    // the legend: each series' sample stroke in its colour, its name in ink after it
    const auto d = perf::plot::layout_of(r, false);
    REQUIRE(d.has_value());
    REQUIRE(d->legend.size() == 2);
    for (const auto& e : d->legend) {
        INFO(e.name.text);
        CHECK(near(img, e.sample.x1 + 3, e.sample.y1, e.colour, 1));
        const ink_box name = ink(img, px(e.name.x), px(e.name.y) - 12, px(e.name.x) + 200, px(e.name.y) + 4);
        CHECK(name.n > 20);
        CHECK(name.left >= px(e.name.x));
        CHECK(name.left <= px(e.name.x) + 2);
    }
    // the legend's names do not run into the next entry's sample
    const ink_box first_name = ink(img, px(d->legend[0].name.x), 40, px(d->legend[1].sample.x1), 62);
    CHECK(first_name.right < px(d->legend[1].sample.x1) - 2);
}

TEST_CASE("png: a latency plot puts each percentile at its log10 height", "[unit][perf][plot]") {
    perf::run_report r;
    r.kind = perf::test_kind::read_lat;
    // t_min 2, t_typical 3, p99 30, p99.9 80 usec at 2 B and 4 KiB: the axis spans 1 .. 100
    for (const std::uint64_t b : {2u, 4096u}) {
        r.lat.push_back({b, 1000, 2, 90, 3, 3.5, 0.2, 30, 80});
    }
    auto f = perf::render_png(r);
    REQUIRE(f.has_value());
    const image img = decode(*f);
    const double x_last = 810;  // 4 KiB: the axis runs 2^1 .. 2^12
    const std::pair<double, std::uint32_t> points[] = {{2, 0x2ca02c}, {3, 0x1f77b4}, {30, 0xff7f0e}, {80, 0xd62728}};
    for (const auto& [v, colour] : points) {
        INFO("value " << v);
        const double y = 440 - std::log10(v) / 2 * 360;
        CHECK(img.at(90, px(y)) == colour);
        CHECK(img.at(px(x_last) - 1, px(y)) == colour);
        CHECK(near(img, 450, y, colour));  // the line between them, level
        CHECK(img.at(450, px(y) - 4) != colour);
    }
}

TEST_CASE("png: --plot x.png writes the PNG; other names are refused and nothing is written", "[unit][perf][plot]") {
    temp_dir d;
    const perf::run_report r = bw_report();
    REQUIRE(perf::write_plot(d.path + "/bw.png", r).has_value());
    CHECK(slurp(d.path + "/bw.png") == *perf::render_png(r));
    REQUIRE(perf::write_plot(d.path + "/BW.PNG", r, true).has_value());  // the extension in any case
    CHECK(decode(slurp(d.path + "/BW.PNG")).width == 900);

    for (const char* bad : {"/x.jpg", "/x.pngx", "/png", "/x.gif"}) {
        INFO(bad);
        auto w = perf::write_plot(d.path + bad, r);
        REQUIRE_FALSE(w.has_value());
        CHECK(w.error() == "--plot " + d.path + bad + ": names neither an SVG nor a PNG file (a name ending in .svg or .png)");
        CHECK_FALSE(std::filesystem::exists(d.path + bad));
    }
    perf::run_report empty;
    empty.kind = perf::test_kind::send_bw;
    auto e = perf::write_plot(d.path + "/empty.png", empty);
    REQUIRE_FALSE(e.has_value());
    CHECK(e.error() == "--plot: the report has no bandwidth rows to draw");
    CHECK_FALSE(std::filesystem::exists(d.path + "/empty.png"));
    auto nowhere = perf::write_plot(d.path + "/no-such-dir/x.png", r);
    REQUIRE_FALSE(nowhere.has_value());
    CHECK(nowhere.error() == "--plot: cannot write " + d.path + "/no-such-dir/x.png: No such file or directory");
}
