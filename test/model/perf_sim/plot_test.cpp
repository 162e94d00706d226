// rig-perf --plot: the SVG is well-formed XML (python3's parser and a tag-balance check here),
// draws one polyline per series with one point per size at the right places, carries its axis
// labels, ticks and legend; bad paths and empty reports are errors that write nothing.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "test/temp_dir.hpp"
#include "tools/rig-perf/plot.hpp"

namespace {

namespace perf = rig::perf;

perf::run_report bw_report(std::uint64_t max_size) {
    perf::run_report r;
    r.kind = perf::test_kind::write_bw;
    for (std::uint64_t b = 2; b <= max_size; b *= 2) {
        const double mpps = 2.5 / (1 + static_cast<double>(b) / 4096);
        r.bw.push_back({b, 5000, 0, mpps * static_cast<double>(b) / 1.048576, mpps});
    }
    return r;
}

perf::run_report lat_report() {
    perf::run_report r;
    r.kind = perf::test_kind::send_lat;
    for (std::uint64_t b : {2u, 64u, 4096u}) {
        const double base = 3 + static_cast<double>(b) / 1000;
        r.lat.push_back({b, 1000, base - 0.5, base * 4, base, base + 0.2, 0.3, base * 2, base * 3});
    }
    return r;
}

// Every element closed in order: the document is a tree (comments, <?xml ?> and
// self-closing tags aside).
bool balanced(const std::string& svg) {
    std::vector<std::string> open;
    for (std::size_t i = svg.find('<'); i != std::string::npos; i = svg.find('<', i + 1)) {
        const std::size_t end = svg.find('>', i);
        if (end == std::string::npos) {
            return false;
        }
        const std::string tag = svg.substr(i + 1, end - i - 1);
        if (tag.starts_with('?') || tag.starts_with('!') || tag.ends_with('/')) {
            continue;
        }
        const std::string name = tag.substr(tag.starts_with('/') ? 1 : 0, tag.find_first_of(" \t\n") -
                                                                               (tag.starts_with('/') ? 1 : 0));
        if (tag.starts_with('/')) {
            if (open.empty() || open.back() != name) {
                return false;
            }
            open.pop_back();
        } else {
            open.push_back(name);
        }
    }
    return open.empty();
}

// the points="..." of each polyline, in document order
std::vector<std::vector<std::pair<double, double>>> polylines(const std::string& svg) {
    std::vector<std::vector<std::pair<double, double>>> out;
    for (std::size_t i = svg.find("<polyline"); i != std::string::npos; i = svg.find("<polyline", i + 1)) {
        const std::size_t p = svg.find("points=\"", i) + 8;
        std::istringstream in(svg.substr(p, svg.find('"', p) - p));
        std::vector<std::pair<double, double>> pts;
        std::string xy;
        while (in >> xy) {
            const auto comma = xy.find(',');
            pts.emplace_back(std::stod(xy.substr(0, comma)), std::stod(xy.substr(comma + 1)));
        }
        out.push_back(pts);
    }
    return out;
}

using rig::test::temp_dir;

std::string slurp(const std::string& path) {
    std::ifstream f(path);
    return {std::istreambuf_iterator<char>(f), {}};
}

bool python_parses(const std::string& path) {
    const std::string cmd = "python3 -c 'import sys, xml.dom.minidom; "
                            "d = xml.dom.minidom.parse(sys.argv[1]); "
                            "assert d.documentElement.tagName == \"svg\"' '" + path + "'";
    return std::system(cmd.c_str()) == 0;
}

TEST_CASE("plot: a bandwidth report is an SVG with bandwidth and message rate against log2 size", "[perf][plot]") {
    temp_dir d;
    const std::string file = d.path + "/write_bw.svg";
    const perf::run_report r = bw_report(65536);  // 16 sizes, 2 B .. 64 KiB
    REQUIRE(perf::write_plot(file, r).has_value());
    const std::string svg = slurp(file);
    CHECK(python_parses(file));
    CHECK(balanced(svg));
    CHECK(svg.find("RDMA_Write BW Test") != std::string::npos);
    for (const char* label : {"BW average [MiB/sec]", "MsgRate [Mpps]", "message size [bytes, log2 scale]", ">2 B<",
                              ">64 KiB<", ">1 KiB<", "id=\"y-left\"", "id=\"y-right\"", "class=\"legend\""}) {
        INFO(label);
        CHECK(svg.find(label) != std::string::npos);
    }
    const auto lines = polylines(svg);
    REQUIRE(lines.size() == 2);
    for (const auto& pts : lines) {
        REQUIRE(pts.size() == 16);
        CHECK(pts.front().first == Approx(90.0));  // 2 B on the left edge, 64 KiB on the right
        CHECK(pts.back().first == Approx(810.0));
        for (std::size_t i = 1; i < pts.size(); ++i) {
            CHECK(pts[i].first - pts[i - 1].first == Approx(720.0 / 15).margin(0.11));  // log2: equal steps
        }
    }
    // bandwidth grows with the size: higher on the page (smaller y); the rate falls
    CHECK(lines[0].back().second < lines[0].front().second);
    CHECK(lines[1].back().second > lines[1].front().second);
    // every point lies inside the frame (y from 80 to 440)
    for (const auto& pts : lines) {
        for (const auto& [x, y] : pts) {
            CHECK((y >= 80.0 && y <= 440.0));
        }
    }
    CHECK(svg.find("<circle") != std::string::npos);
}

TEST_CASE("plot: --report_gbits draws Gb/s; 8 MiB is labelled", "[perf][plot]") {
    const perf::run_report r = bw_report(1u << 23);  // 23 sizes: labels thinned, still 2 B and 8 MiB
    auto svg = perf::render_plot(r, true);
    REQUIRE(svg.has_value());
    CHECK(svg->find("BW average [Gb/sec]") != std::string::npos);
    CHECK(svg->find("MiB/sec") == std::string::npos);
    CHECK(svg->find(">2 B<") != std::string::npos);
    CHECK(svg->find(">8 MiB<") != std::string::npos);
    CHECK(balanced(*svg));
    const auto lines = polylines(*svg);
    REQUIRE(lines.size() == 2);
    CHECK(lines[0].size() == 23);
}

TEST_CASE("plot: a latency report draws t_min, t_typical and the 99% and 99.9% percentiles", "[perf][plot]") {
    temp_dir d;
    const std::string file = d.path + "/send_lat.svg";
    const perf::run_report r = lat_report();
    REQUIRE(perf::write_plot(file, r).has_value());
    const std::string svg = slurp(file);
    CHECK(python_parses(file));
    CHECK(balanced(svg));
    for (const char* label : {"Send Latency Test", "latency [usec, log10 scale]", "t_min", "t_typical", "99% percentile",
                              "99.9% percentile", ">4 KiB<"}) {
        INFO(label);
        CHECK(svg.find(label) != std::string::npos);
    }
    CHECK(svg.find("id=\"y-right\"") == std::string::npos);  // one y axis
    const auto lines = polylines(svg);
    REQUIRE(lines.size() == 4);
    for (const auto& pts : lines) {
        CHECK(pts.size() == 3);
    }
    // the log10 axis spans 1 .. 100 usec here (values 2.5 .. 36.9): decade ticks, and t_typical
    // of 2 B (3.002 usec) at its logarithm's height
    for (const char* tick : {">1<", ">2<", ">5<", ">10<", ">20<", ">50<", ">100<"}) {
        INFO(tick);
        CHECK(svg.find(tick) != std::string::npos);
    }
    CHECK(lines[1][0].second == Approx(440 - std::log10(3.002) / 2 * 360).margin(0.06));
    // at each size: t_min below t_typical below p99 below p99.9 (larger value, smaller y)
    for (std::size_t i = 0; i < 3; ++i) {
        CHECK(lines[0][i].second > lines[1][i].second);
        CHECK(lines[1][i].second > lines[2][i].second);
        CHECK(lines[2][i].second > lines[3][i].second);
    }
}

TEST_CASE("plot: one size gives one point per series, centred", "[perf][plot]") {
    perf::run_report r;
    r.kind = perf::test_kind::write_lat;
    r.lat.push_back({2, 1000, 1, 2, 1.5, 1.6, 0.1, 1.9, 2.0});
    auto svg = perf::render_plot(r);
    REQUIRE(svg.has_value());
    const auto lines = polylines(*svg);
    REQUIRE(lines.size() == 4);
    CHECK(lines[0].size() == 1);
    CHECK(lines[0][0].first == Approx(450.0));
}

TEST_CASE("plot: neither .svg nor .png, an unwritable path, an empty report or a NaN are errors that write nothing",
          "[perf][plot]") {
    temp_dir d;
    const perf::run_report r = bw_report(64);
    auto jpg = perf::write_plot(d.path + "/x.jpg", r);  // SVG or PNG (plot_png_test in test/unit/perf)
    REQUIRE_FALSE(jpg.has_value());
    CHECK(jpg.error() == "--plot " + d.path + "/x.jpg: names neither an SVG nor a PNG file (a name ending in .svg or .png)");
    CHECK_FALSE(std::filesystem::exists(d.path + "/x.jpg"));

    const std::string nowhere = d.path + "/no-such-dir/x.svg";
    auto bad = perf::write_plot(nowhere, r);
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error() == "--plot: cannot write " + nowhere + ": No such file or directory");

    perf::run_report empty;
    empty.kind = perf::test_kind::read_bw;
    auto none = perf::write_plot(d.path + "/empty.svg", empty);
    REQUIRE_FALSE(none.has_value());
    CHECK(none.error() == "--plot: the report has no bandwidth rows to draw");
    CHECK_FALSE(std::filesystem::exists(d.path + "/empty.svg"));
    perf::run_report lat_kind_bw_rows = r;  // a latency report carrying only bw rows is empty too
    lat_kind_bw_rows.kind = perf::test_kind::read_lat;
    CHECK_FALSE(perf::render_plot(lat_kind_bw_rows).has_value());

    perf::run_report nan = r;
    nan.bw[1].msg_rate_mpps = std::nan("");
    auto n = perf::write_plot(d.path + "/nan.svg", nan);
    REQUIRE_FALSE(n.has_value());
    CHECK(n.error().find("MsgRate of the 4-byte row") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(d.path + "/nan.svg"));
}

}  // namespace
