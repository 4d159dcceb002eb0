// write_loss_plot: the plot drawn by cairo on an RGB image surface and written as PNG (see loss_plot.h).
#include "cli/train/loss_plot.h"

#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"

namespace mt {
namespace {

struct Rgb {
  double r, g, b;
};
constexpr Rgb kBlack = {0, 0, 0}, kBlue = {31 / 255.0, 119 / 255.0, 180 / 255.0};  // matplotlib's first colour

void set_colour(cairo_t* cr, Rgb c, double alpha = 1.0) { cairo_set_source_rgba(cr, c.r, c.g, c.b, alpha); }

// Text with its anchor at (x, y): ax, ay in [0, 1] place the anchor along the text's width and height.
void text_at(cairo_t* cr, const std::string& text, double x, double y, double ax, double ay) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, text.c_str(), &e);
  cairo_move_to(cr, x - e.x_bearing - ax * e.width, y - e.y_bearing - ay * e.height);
  cairo_show_text(cr, text.c_str());
}

// A tick's label: as few digits as tell the ticks apart.
std::string tick_label(double value, double step) {
  const int decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  return fmt::format("{:.{}f}", std::abs(value) < step * 1e-6 ? 0.0 : value, decimals);
}

}  // namespace

std::vector<double> smooth_curve(const std::vector<double>& values) {
  if (values.empty()) return {};
  const double weight = 1.8 * (1.0 / (1.0 + std::exp(-0.05 * static_cast<double>(values.size()))) - 0.5);
  std::vector<double> out;
  double last = values.front();
  for (const double v : values) {
    last = last * weight + (1.0 - weight) * v;
    out.push_back(last);
  }
  return out;
}

std::vector<double> axis_ticks(double low, double high, int target) {
  const double raw = (high - low) / std::max(target, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (const double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  std::vector<double> ticks;
  for (double k = std::ceil(low / step - 1e-9); k * step <= high + step * 1e-9; k += 1.0) ticks.push_back(k * step);
  return ticks;
}

bool write_loss_plot(const std::filesystem::path& file, const std::vector<std::pair<int64_t, double>>& points,
                     const std::string& title, const std::string& value_name) {
  if (points.size() < 2) return false;
  constexpr double left = 72, right = 20, top = 36, bottom = 52;
  const double x_min = static_cast<double>(points.front().first), x_max = static_cast<double>(points.back().first);
  std::vector<double> values;
  for (const auto& p : points) values.push_back(p.second);
  const std::vector<double> smooth = smooth_curve(values);
  double y_min = *std::min_element(values.begin(), values.end()), y_max = *std::max_element(values.begin(), values.end());
  if (y_max - y_min < 1e-12) y_max = y_min + 1.0;
  const double pad = 0.05 * (y_max - y_min);  // matplotlib's margins
  y_min -= pad;
  y_max += pad;
  const double x_pad = 0.05 * std::max(x_max - x_min, 1.0), x_low = x_min - x_pad, x_high = x_max + x_pad;
  const auto px = [&](double x) { return left + (x - x_low) / (x_high - x_low) * (kPlotWidth - left - right); };
  const auto py = [&](double y) { return kPlotHeight - bottom - (y - y_min) / (y_max - y_min) * (kPlotHeight - top - bottom); };

  const std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> surface(
      cairo_image_surface_create(CAIRO_FORMAT_RGB24, kPlotWidth, kPlotHeight), cairo_surface_destroy);
  const std::unique_ptr<cairo_t, decltype(&cairo_destroy)> context(cairo_create(surface.get()), cairo_destroy);
  cairo_t* cr = context.get();
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_line_width(cr, 1.0);

  // The curves, clipped to the axes' box: the logged values pale, their smoothing over them.
  cairo_save(cr);
  cairo_rectangle(cr, left, top, kPlotWidth - left - right, kPlotHeight - top - bottom);
  cairo_clip(cr);
  cairo_set_line_width(cr, 1.5);
  using Curve = std::pair<const std::vector<double>*, double>;  // (values, alpha)
  for (const auto& [curve, alpha] : {Curve{&values, 0.4}, Curve{&smooth, 1.0}}) {
    for (size_t i = 0; i < points.size(); ++i)
      cairo_line_to(cr, px(static_cast<double>(points[i].first)), py((*curve)[i]));
    set_colour(cr, kBlue, alpha);
    cairo_stroke(cr);
  }
  cairo_restore(cr);

  // The box, the ticks with their numbers, the axis labels, the title and the legend.
  set_colour(cr, kBlack);
  cairo_rectangle(cr, left + 0.5, top + 0.5, kPlotWidth - left - right - 1, kPlotHeight - top - bottom - 1);
  cairo_stroke(cr);
  cairo_set_font_size(cr, 11);
  const std::vector<double> x_ticks = axis_ticks(x_low, x_high, 6), y_ticks = axis_ticks(y_min, y_max, 6);
  const double x_step = x_ticks.size() > 1 ? x_ticks[1] - x_ticks[0] : 1.0;
  const double y_step = y_ticks.size() > 1 ? y_ticks[1] - y_ticks[0] : 1.0;
  for (const double t : x_ticks) {
    const double x = std::round(px(t)) + 0.5;
    cairo_move_to(cr, x, kPlotHeight - bottom);
    cairo_line_to(cr, x, kPlotHeight - bottom + 4);
    cairo_stroke(cr);
    text_at(cr, tick_label(t, std::max(x_step, 1.0)), x, kPlotHeight - bottom + 7, 0.5, 0.0);
  }
  for (const double t : y_ticks) {
    const double y = std::round(py(t)) + 0.5;
    cairo_move_to(cr, left - 4, y);
    cairo_line_to(cr, left, y);
    cairo_stroke(cr);
    text_at(cr, tick_label(t, y_step), left - 7, y, 1.0, 0.5);
  }
  cairo_set_font_size(cr, 12);
  text_at(cr, "step", left + (kPlotWidth - left - right) / 2, kPlotHeight - 20, 0.5, 0.0);
  cairo_save(cr);
  cairo_translate(cr, 14, top + (kPlotHeight - top - bottom) / 2);
  cairo_rotate(cr, -M_PI / 2);
  text_at(cr, value_name, 0, 0, 0.5, 0.0);
  cairo_restore(cr);
  cairo_set_font_size(cr, 13);
  text_at(cr, title, left + (kPlotWidth - left - right) / 2, 12, 0.5, 0.0);
  // The legend, top right inside the axes, as matplotlib's loc="best" puts it over a falling curve.
  cairo_set_font_size(cr, 11);
  const double lx = kPlotWidth - right - 118, ly = top + 8;
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_rectangle(cr, lx, ly, 108, 44);
  cairo_fill_preserve(cr);
  cairo_set_source_rgb(cr, 0.8, 0.8, 0.8);
  cairo_stroke(cr);
  const std::pair<const char*, double> entries[] = {{"original", 0.4}, {"smoothed", 1.0}};
  for (int k = 0; k < 2; ++k) {
    const double y = ly + 14 + 18 * k;
    cairo_set_line_width(cr, 1.5);
    set_colour(cr, kBlue, entries[k].second);
    cairo_move_to(cr, lx + 8, y);
    cairo_line_to(cr, lx + 36, y);
    cairo_stroke(cr);
    set_colour(cr, kBlack);
    text_at(cr, entries[k].first, lx + 44, y, 0.0, 0.5);
  }

  cairo_surface_flush(surface.get());
  const std::filesystem::path tmp = file.string() + ".tmp";
  const cairo_status_t written = cairo_surface_write_to_png(surface.get(), tmp.c_str());
  std::error_code ec;
  if (written == CAIRO_STATUS_SUCCESS) std::filesystem::rename(tmp, file, ec);
  if (written != CAIRO_STATUS_SUCCESS || ec) std::filesystem::remove(tmp, ec);
  MT_REQUIRE(written == CAIRO_STATUS_SUCCESS && !ec, "{}: cannot write {}", written != CAIRO_STATUS_SUCCESS
             ? std::string(cairo_status_to_string(written)) : ec.message(), file.string());
  return true;
}

}  // namespace mt
