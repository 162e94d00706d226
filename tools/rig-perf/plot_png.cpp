// rig-perf --plot FILE.png: plot_layout's drawing through Cairo on a 900 x 520 RGB image, the
// text in DejaVu Sans (fonts-dejavu-core, found by fontconfig) at the SVG's sizes, encoded by
// Cairo's PNG writer (libpng). The same primitives as the SVG, in its order: background,
// heading, axes (grid, tick marks, labels), frame, each series (its line, then its point
// markers), legend.
//
// The curves and text are anti-aliased; the one-pixel rules (frame, grid, tick marks) are
// drawn through pixel centres, so that a rule at y = 80 inks row 80 alone, in its own colour
// (drawn along the pixels' edge it would smear into two half-grey rows).
#include <cmath>
#include <cstdlib>
#include <memory>
#include <numbers>

#include <cairo-ft.h>
#include <cairo.h>
#include <fontconfig/fontconfig.h>

#include "tools/rig-perf/plot_layout.hpp"

namespace rig::perf::plot {

namespace {

constexpr const char* font_family = "DejaVu Sans";

using surface_ptr = std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)>;
using context_ptr = std::unique_ptr<cairo_t, decltype(&cairo_destroy)>;

void colour(cairo_t* cr, std::uint32_t rgb) {
    cairo_set_source_rgb(cr, ((rgb >> 16) & 0xff) / 255.0, ((rgb >> 8) & 0xff) / 255.0, (rgb & 0xff) / 255.0);
}

// The SVG's font: 12 units, the heading 16 in bold, the size ticks 11 (plot.cpp).
void font(cairo_t* cr, role r) {
    cairo_select_font_face(cr, font_family, CAIRO_FONT_SLANT_NORMAL,
                           r == role::heading ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, r == role::heading ? 16 : r == role::size_tick ? 11 : 12);
}

// Grey-scale anti-aliasing whatever the desktop's fontconfig asks for (sub-pixel colour
// fringes belong on an LCD, not in an image file), and metrics not hinted, so that a text's
// width scales with its size as the SVG viewer's does.
void font_options(cairo_t* cr) {
    cairo_font_options_t* o = cairo_font_options_create();
    cairo_font_options_set_antialias(o, CAIRO_ANTIALIAS_GRAY);
    cairo_font_options_set_subpixel_order(o, CAIRO_SUBPIXEL_ORDER_DEFAULT);
    cairo_font_options_set_hint_style(o, CAIRO_HINT_STYLE_SLIGHT);
    cairo_font_options_set_hint_metrics(o, CAIRO_HINT_METRICS_OFF);
    cairo_set_font_options(cr, o);
    cairo_font_options_destroy(o);
}

// As SVG's text-anchor: the baseline through (x, y), the start, middle or end of its advance
// there; rotated about (x, y).
void draw(cairo_t* cr, const label& l) {
    cairo_save(cr);
    font(cr, l.r);
    cairo_text_extents_t e;
    cairo_text_extents(cr, l.text.c_str(), &e);
    const double shift = l.a == anchor::start ? 0 : l.a == anchor::middle ? e.x_advance / 2 : e.x_advance;
    cairo_translate(cr, l.x, l.y);
    cairo_rotate(cr, l.rotate * std::numbers::pi / 180);
    cairo_move_to(cr, -shift, 0);
    colour(cr, 0x000000);
    cairo_show_text(cr, l.text.c_str());
    cairo_restore(cr);
}

// A one-pixel rule, horizontal or vertical, through the centres of the pixels it covers.
void rule(cairo_t* cr, const segment& s, std::uint32_t rgb) {
    const auto centre = [](double v) { return std::floor(v) + 0.5; };
    double x1 = s.x1, y1 = s.y1, x2 = s.x2, y2 = s.y2;
    if (y1 == y2) {
        y1 = y2 = centre(y1);
    } else if (x1 == x2) {
        x1 = x2 = centre(x1);
    }
    cairo_move_to(cr, x1, y1);
    cairo_line_to(cr, x2, y2);
    cairo_set_line_width(cr, 1);
    colour(cr, rgb);
    cairo_stroke(cr);
}

// A series' stroke: line_width wide, dashed dash_on / dash_off along the whole path (the
// pattern runs on through the corners, as SVG's stroke-dasharray does).
void stroke(cairo_t* cr, std::uint32_t rgb, bool dashed) {
    static constexpr double dashes[] = {dash_on, dash_off};
    cairo_set_line_width(cr, line_width);
    cairo_set_dash(cr, dashes, dashed ? 2 : 0, 0);
    colour(cr, rgb);
    cairo_stroke(cr);
    cairo_set_dash(cr, nullptr, 0, 0);
}

std::string cairo_error(cairo_status_t s) { return std::string("--plot: cairo: ") + cairo_status_to_string(s); }

// Cairo keeps its font map, and fontconfig its configuration, for the life of the process. At
// exit both are released (cairo_debug_reset_static_data and FcFini, which their manuals give
// for this), so that a leak checker (./check --sanitize) sees rig-perf free what it took.
// Registered at the first drawing; at exit no Cairo object of ours is alive.
void release_fonts_at_exit() {
    static const bool registered = [] {
        std::atexit([] {
            cairo_debug_reset_static_data();
            FcFini();
        });
        return true;
    }();
    (void)registered;
}

}  // namespace

std::expected<std::vector<std::uint8_t>, std::string> png_of(const layout& d) {
    release_fonts_at_exit();
    const surface_ptr surface(
        cairo_image_surface_create(CAIRO_FORMAT_RGB24, static_cast<int>(canvas_w), static_cast<int>(canvas_h)),
        cairo_surface_destroy);
    const context_ptr context(cairo_create(surface.get()), cairo_destroy);
    cairo_t* cr = context.get();
    font_options(cr);
    cairo_set_miter_limit(cr, 4);  // SVG's default (Cairo's is 10)
    colour(cr, 0xffffff);
    cairo_paint(cr);

    draw(cr, d.heading);
    for (const axis& a : d.axes) {
        for (const segment& s : a.grid) {
            rule(cr, s, grid_colour);
        }
        for (const segment& s : a.marks) {
            rule(cr, s, 0x000000);
        }
        for (const label& l : a.labels) {
            draw(cr, l);
        }
    }
    cairo_rectangle(cr, std::floor(frame_left) + 0.5, std::floor(frame_top) + 0.5, frame_right - frame_left,
                    frame_bottom - frame_top);
    cairo_set_line_width(cr, 1);
    colour(cr, 0x000000);
    cairo_stroke(cr);
    for (const series& s : d.lines) {
        for (const auto& [x, y] : s.points) {
            cairo_line_to(cr, x, y);  // the first one moves there (no current point yet)
        }
        stroke(cr, s.colour, s.dashed);
        colour(cr, s.colour);
        for (const auto& [x, y] : s.points) {
            cairo_new_sub_path(cr);
            cairo_arc(cr, x, y, marker_radius, 0, 2 * std::numbers::pi);
        }
        cairo_fill(cr);
    }
    for (const legend_entry& e : d.legend) {
        cairo_move_to(cr, e.sample.x1, e.sample.y1);
        cairo_line_to(cr, e.sample.x2, e.sample.y2);
        stroke(cr, e.colour, e.dashed);
        draw(cr, e.name);
    }
    if (const cairo_status_t s = cairo_status(cr); s != CAIRO_STATUS_SUCCESS) {
        return std::unexpected(cairo_error(s));
    }

    std::vector<std::uint8_t> png;
    const auto append = [](void* to, const unsigned char* data, unsigned int n) {
        auto* out = static_cast<std::vector<std::uint8_t>*>(to);
        out->insert(out->end(), data, data + n);
        return CAIRO_STATUS_SUCCESS;
    };
    if (const cairo_status_t s = cairo_surface_write_to_png_stream(surface.get(), append, &png);
        s != CAIRO_STATUS_SUCCESS) {
        return std::unexpected(cairo_error(s));
    }
    return png;
}

std::string png_font(bool bold) {
    release_fonts_at_exit();
    const surface_ptr surface(cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1), cairo_surface_destroy);
    const context_ptr context(cairo_create(surface.get()), cairo_destroy);
    font(context.get(), bold ? role::heading : role::legend);
    cairo_scaled_font_t* f = cairo_get_scaled_font(context.get());
    if (cairo_scaled_font_get_type(f) != CAIRO_FONT_TYPE_FT) {
        return {};
    }
    std::string name;
    if (FT_Face face = cairo_ft_scaled_font_lock_face(f); face != nullptr) {
        name = std::string(face->family_name != nullptr ? face->family_name : "") + " " +
               (face->style_name != nullptr ? face->style_name : "");
        cairo_ft_scaled_font_unlock_face(f);
    }
    return name;
}

}  // namespace rig::perf::plot
