// rig-perf --plot FILE.png (tools/rig-perf/plot.hpp, png.hpp, raster.hpp): the PNG is decoded
// here by an independent reader (signature, every chunk's CRC by the bitwise definition, IHDR,
// the zlib stream's header, stored blocks and Adler-32, each row's filter byte) and its pixels
// checked against the data: each series' colour where its points lie, the frame, the grid, the
// dashes of the message-rate line. CRC-32 and Adler-32 against their published check values;
// a file name of another format is refused and nothing is written.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "test/temp_dir.hpp"
#include "tools/rig-perf/plot.hpp"
#include "tools/rig-perf/png.hpp"

namespace {

namespace perf = rig::perf;
namespace png = rig::perf::png;
using bytes = std::vector<std::uint8_t>;

bytes of(std::string_view s) { return bytes(s.begin(), s.end()); }

// ---- an independent PNG reader

std::uint32_t bitwise_crc(const std::uint8_t* p, std::size_t n) {
    std::uint32_t c = 0xffffffff;
    for (std::size_t i = 0; i < n; ++i) {
        c ^= p[i];
        for (int k = 0; k < 8; ++k) {
            c = (c >> 1) ^ ((c & 1) != 0 ? 0xedb88320u : 0);
        }
    }
    return ~c;
}

std::uint32_t naive_adler(const bytes& d) {
    std::uint32_t a = 1, b = 0;
    for (const std::uint8_t x : d) {
        a = (a + x) % 65521;
        b = (b + a) % 65521;
    }
    return b << 16 | a;
}

std::uint32_t be32(const bytes& d, std::size_t at) {
    REQUIRE(at + 4 <= d.size());
    return std::uint32_t{d[at]} << 24 | std::uint32_t{d[at + 1]} << 16 | std::uint32_t{d[at + 2]} << 8 | d[at + 3];
}

// Inflates a zlib stream that must hold only stored blocks; checks its header and Adler-32.
bytes inflate_stored(const bytes& z) {
    REQUIRE(z.size() >= 2 + 5 + 4);
    CHECK(z[0] == 0x78);                     // deflate, 32 KiB window
    CHECK((z[0] * 256 + z[1]) % 31 == 0);  // FCHECK
    CHECK((z[1] & 0x20) == 0);             // no preset dictionary
    bytes out;
    std::size_t at = 2;
    bool final = false;
    int blocks = 0;
    while (!final) {
        REQUIRE(at + 5 <= z.size());
        const std::uint8_t h = z[at];
        final = (h & 1) != 0;
        REQUIRE(((h >> 1) & 3) == 0);  // BTYPE 00: stored
        const std::size_t len = z[at + 1] | std::size_t{z[at + 2]} << 8;
        const std::size_t nlen = z[at + 3] | std::size_t{z[at + 4]} << 8;
        REQUIRE((len ^ nlen) == 0xffff);
        at += 5;
        REQUIRE(at + len <= z.size());
        out.insert(out.end(), z.begin() + static_cast<std::ptrdiff_t>(at), z.begin() + static_cast<std::ptrdiff_t>(at + len));
        at += len;
        ++blocks;
    }
    REQUIRE(at + 4 == z.size());  // the Adler-32 and nothing after it
    CHECK(be32(z, at) == naive_adler(out));
    return out;
}

struct image {
    std::uint32_t width = 0, height = 0;
    bytes rgb;  // rows of RGB
    std::uint32_t at(std::uint32_t x, std::uint32_t y) const {
        REQUIRE((x < width && y < height));
        const std::size_t i = (std::size_t{y} * width + x) * 3;
        return std::uint32_t{rgb[i]} << 16 | std::uint32_t{rgb[i + 1]} << 8 | rgb[i + 2];
    }
};

image decode(const bytes& f) {
    static const bytes signature{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    REQUIRE(f.size() > 8);
    REQUIRE(bytes(f.begin(), f.begin() + 8) == signature);
    std::size_t at = 8;
    std::vector<std::string> order;
    image img;
    bytes idat;
    while (at < f.size()) {
        const std::uint32_t len = be32(f, at);
        REQUIRE(at + 12 + len <= f.size());
        const std::string type(f.begin() + static_cast<std::ptrdiff_t>(at + 4), f.begin() + static_cast<std::ptrdiff_t>(at + 8));
        INFO("chunk " << type);
        CHECK(be32(f, at + 8 + len) == bitwise_crc(f.data() + at + 4, len + 4));  // over type and data
        if (type == "IHDR") {
            REQUIRE(len == 13);
            img.width = be32(f, at + 8);
            img.height = be32(f, at + 12);
            CHECK(f[at + 16] == 8);   // bit depth
            CHECK(f[at + 17] == 2);   // truecolour
            CHECK(f[at + 18] == 0);   // deflate
            CHECK(f[at + 19] == 0);   // filter method 0
            CHECK(f[at + 20] == 0);   // no interlace
        } else if (type == "IDAT") {
            idat.insert(idat.end(), f.begin() + static_cast<std::ptrdiff_t>(at + 8),
                        f.begin() + static_cast<std::ptrdiff_t>(at + 8 + len));
        }
        order.push_back(type);
        at += 12 + len;
    }
    REQUIRE(at == f.size());
    REQUIRE(order.size() >= 3);
    CHECK(order.front() == "IHDR");
    CHECK(order.back() == "IEND");
    const bytes raw = inflate_stored(idat);
    const std::size_t row = std::size_t{img.width} * 3;
    REQUIRE(raw.size() == (row + 1) * img.height);
    for (std::uint32_t y = 0; y < img.height; ++y) {
        const std::size_t r = y * (row + 1);
        REQUIRE(raw[r] == 0);  // filter type None
        img.rgb.insert(img.rgb.end(), raw.begin() + static_cast<std::ptrdiff_t>(r + 1),
                       raw.begin() + static_cast<std::ptrdiff_t>(r + 1 + row));
    }
    return img;
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
std::uint32_t px(double v) { return static_cast<std::uint32_t>(std::floor(v)); }

bytes slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return bytes(std::istreambuf_iterator<char>(f), {});
}

using rig::test::temp_dir;

}  // namespace

TEST_CASE("png: CRC-32 and Adler-32 give their published check values", "[unit][perf][plot]") {
    CHECK(png::crc32(of("123456789")) == 0xCBF43926u);
    CHECK(png::crc32(of("")) == 0);
    CHECK(png::crc32(of("IEND")) == 0xAE426082u);  // the CRC every PNG ends with
    CHECK(png::crc32(of("56789"), png::crc32(of("1234"))) == 0xCBF43926u);  // continued
    CHECK(png::adler32(of("Wikipedia")) == 0x11E60398u);
    CHECK(png::adler32(of("")) == 1);
    bytes big(300000);
    for (std::size_t i = 0; i < big.size(); ++i) {
        big[i] = static_cast<std::uint8_t>(255 - i % 7);  // sums that pass the modulo many times
    }
    CHECK(png::adler32(big) == naive_adler(big));
    CHECK(png::crc32(big) == bitwise_crc(big.data(), big.size()));
}

TEST_CASE("png: the zlib stream is stored blocks of at most 65535 bytes that inflate to the data",
          "[unit][perf][plot]") {
    for (const std::size_t n : {0u, 1u, 65535u, 65536u, 200000u}) {
        INFO(n << " bytes");
        bytes d(n);
        for (std::size_t i = 0; i < n; ++i) {
            d[i] = static_cast<std::uint8_t>(i * 31 + 7);
        }
        const bytes z = png::zlib_stored(d);
        const std::size_t blocks = n == 0 ? 1 : (n + 65534) / 65535;
        CHECK(z.size() == 2 + n + 5 * blocks + 4);
        CHECK(inflate_stored(z) == d);
    }
}

TEST_CASE("png: a small image, byte for byte through the reader; bad sizes are misuse", "[unit][perf][plot]") {
    const bytes rgb{255, 0, 0, 0, 255, 0, 0, 0, 255,  // red, green, blue
                    1, 2, 3, 4, 5, 6, 7, 8, 9};
    const bytes f = png::encode_rgb(3, 2, rgb);
    const image img = decode(f);
    CHECK(img.width == 3);
    CHECK(img.height == 2);
    CHECK(img.rgb == rgb);
    CHECK(img.at(1, 0) == 0x00ff00);
    CHECK(f.size() == 8 + (12 + 13) + (12 + 2 + 5 + 2 * 10 + 4) + 12);
    CHECK_THROWS_AS(png::encode_rgb(3, 2, bytes(17)), std::invalid_argument);
    CHECK_THROWS_AS(png::encode_rgb(0, 2, bytes{}), std::invalid_argument);
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
    CHECK(img.at(90, 80) == black);     // the frame's corners
    CHECK(img.at(810, 440) == black);
    CHECK(img.at(450, 440) == black);   // its bottom edge
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
        CHECK(img.at(px(x), px(y_bw)) == bw_blue);  // the point's marker
        CHECK(img.at(px(x), px(y_rate)) == rate_red);
        CHECK(img.at(px(x), px(y_bw) + 8) != bw_blue);  // and not a blur of it
        ++checked;
    }
    CHECK(checked >= 8);
    // the BW line is solid: its colour midway between the first two points
    CHECK(img.at(px((x_of_log2(1) + x_of_log2(2)) / 2), px((y_linear(4, 400) + y_linear(16, 400)) / 2)) == bw_blue);
    // the rate line is dashed: along its segment from 64 B to 128 B, red and gaps
    int red = 0, gap = 0;
    for (int i = 8; i <= 72; ++i) {
        const double t = i / 80.0;
        const double x = x_of_log2(6) + t * (x_of_log2(7) - x_of_log2(6));
        const double y = y_linear(0.9 - 0.08 * (6 + t), 1.0);
        (img.at(px(x), px(y)) == rate_red ? red : gap) += 1;
    }
    CHECK(red > 20);
    CHECK(gap > 10);
    // the heading is ink on white above the legend
    int ink = 0;
    for (std::uint32_t y = 14; y < 32; ++y) {
        for (std::uint32_t x = 100; x < 800; ++x) {
            ink += img.at(x, y) == black ? 1 : 0;
        }
    }
    CHECK(ink > 500);
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
