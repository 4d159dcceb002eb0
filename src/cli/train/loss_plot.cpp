// write_loss_plot: a small raster plot (own line drawing) encoded by libpng.
#include "cli/train/loss_plot.h"

#include <png.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace mt {
namespace {

using Rgb = std::array<uint8_t, 3>;

struct Canvas {
  std::vector<uint8_t> pixels = std::vector<uint8_t>(static_cast<size_t>(kPlotWidth * kPlotHeight * 3), 255);
  void set(int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= kPlotWidth || y >= kPlotHeight) return;
    std::copy(c.begin(), c.end(), pixels.begin() + (static_cast<size_t>(y) * kPlotWidth + x) * 3);
  }
  void line(double x0, double y0, double x1, double y1, Rgb c) {  // a DDA line, one pixel wide
    const int n = static_cast<int>(std::ceil(std::max(std::abs(x1 - x0), std::abs(y1 - y0)))) + 1;
    for (int i = 0; i <= n; ++i) {
      const double t = static_cast<double>(i) / n;
      set(static_cast<int>(std::lround(x0 + t * (x1 - x0))), static_cast<int>(std::lround(y0 + t * (y1 - y0))), c);
    }
  }
};

void write_png(const std::filesystem::path& file, const Canvas& canvas) {
  const std::filesystem::path tmp = file.string() + ".tmp";
  std::FILE* out = std::fopen(tmp.c_str(), "wb");
  MT_REQUIRE(out != nullptr, "{}: cannot open for writing", tmp.string());
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  volatile bool ok = png != nullptr && info != nullptr;
  if (ok && setjmp(png_jmpbuf(png))) ok = false;  // libpng failed inside the block below
  if (ok) {
    png_init_io(png, out);
    png_set_IHDR(png, info, kPlotWidth, kPlotHeight, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < kPlotHeight; ++y)
      png_write_row(png, canvas.pixels.data() + static_cast<size_t>(y) * kPlotWidth * 3);
    png_write_end(png, nullptr);
  }
  png_destroy_write_struct(&png, &info);
  ok = std::fclose(out) == 0 && ok;
  std::error_code ec;
  if (ok) std::filesystem::rename(tmp, file, ec);
  if (!ok || ec) std::filesystem::remove(tmp, ec);
  MT_REQUIRE(ok, "{}: cannot write the PNG", file.string());
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

bool write_loss_plot(const std::filesystem::path& file, const std::vector<std::pair<int64_t, double>>& points) {
  if (points.size() < 2) return false;
  constexpr int left = 60, right = 20, top = 20, bottom = 40;
  const double x_min = static_cast<double>(points.front().first), x_max = static_cast<double>(points.back().first);
  std::vector<double> values;
  for (const auto& p : points) values.push_back(p.second);
  const std::vector<double> smooth = smooth_curve(values);
  double y_min = *std::min_element(values.begin(), values.end()), y_max = *std::max_element(values.begin(), values.end());
  if (y_max - y_min < 1e-12) y_max = y_min + 1.0;
  const double pad = 0.05 * (y_max - y_min);
  y_min -= pad;
  y_max += pad;
  const auto px = [&](double x) { return left + (x - x_min) / std::max(x_max - x_min, 1e-12) * (kPlotWidth - left - right); };
  const auto py = [&](double y) { return kPlotHeight - bottom - (y - y_min) / (y_max - y_min) * (kPlotHeight - top - bottom); };
  Canvas c;
  const Rgb axis = {0, 0, 0}, pale = {150, 190, 230}, blue = {31, 119, 180};
  c.line(left, top, left, kPlotHeight - bottom, axis);
  c.line(left, kPlotHeight - bottom, kPlotWidth - right, kPlotHeight - bottom, axis);
  c.line(left, top, kPlotWidth - right, top, axis);
  c.line(kPlotWidth - right, top, kPlotWidth - right, kPlotHeight - bottom, axis);
  for (int k = 0; k <= 5; ++k) {  // tick marks at sixths of each axis
    const double x = left + k * (kPlotWidth - left - right) / 5.0, y = top + k * (kPlotHeight - top - bottom) / 5.0;
    c.line(x, kPlotHeight - bottom, x, kPlotHeight - bottom + 5, axis);
    c.line(left - 5, y, left, y, axis);
  }
  for (size_t i = 1; i < points.size(); ++i) {
    const double x0 = px(static_cast<double>(points[i - 1].first)), x1 = px(static_cast<double>(points[i].first));
    c.line(x0, py(values[i - 1]), x1, py(values[i]), pale);
  }
  for (size_t i = 1; i < points.size(); ++i) {
    const double x0 = px(static_cast<double>(points[i - 1].first)), x1 = px(static_cast<double>(points[i].first));
    c.line(x0, py(smooth[i - 1]), x1, py(smooth[i]), blue);
  }
  write_png(file, c);
  return true;
}

}  // namespace mt
