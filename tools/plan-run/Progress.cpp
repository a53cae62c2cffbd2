//===- Progress.cpp - What rank 0 prints while it trains ------------------===//

#include "Progress.h"

#include "Format.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace plan::run {

namespace {

std::string format(const char *fmt, auto... args) {
  int n = std::snprintf(nullptr, 0, fmt, args...);
  std::string out(static_cast<size_t>(std::max(n, 0)), '\0');
  std::snprintf(out.data(), out.size() + 1, fmt, args...);
  return out;
}

} // namespace

std::string formatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    return "?";
  auto total = static_cast<long long>(std::llround(seconds));
  long long h = total / 3600, m = total / 60 % 60, s = total % 60;
  return h > 0 ? format("%lld:%02lld:%02lld", h, m, s)
               : format("%lld:%02lld", m, s);
}

std::string formatStepLine(const StepMetrics &m, int64_t totalSteps) {
  std::string line =
      format("step %lld/%lld loss %.4f lr %.1e tok/s %.0f",
             static_cast<long long>(m.step), static_cast<long long>(totalSteps),
             m.loss, m.lr, m.tokensPerSecond());
  if (m.lossScale)
    line +=
        format(" loss_scale %g%s", *m.lossScale, m.skipped ? " skipped" : "");
  return line;
}

std::string formatProgressBar(const StepMetrics &m, int64_t totalSteps,
                              double elapsedS, int width, int64_t firstStep) {
  int64_t total = std::max<int64_t>(totalSteps, 1);
  int filled =
      static_cast<int>(std::clamp<int64_t>(m.step * width / total, 0, width));
  std::string bar(static_cast<size_t>(width) + 2, '.');
  bar.front() = '[';
  bar.back() = ']';
  std::fill_n(bar.begin() + 1, filled, '#');
  int64_t done = m.step - firstStep + 1; // the steps elapsedS covers
  double eta = done > 0 ? elapsedS / static_cast<double>(done) *
                              static_cast<double>(total - m.step)
                        : NAN;
  return bar + format(" %lld/%lld loss %.4f tok/s %.0f ETA %s",
                      static_cast<long long>(m.step),
                      static_cast<long long>(totalSteps), m.loss,
                      m.tokensPerSecond(), formatDuration(eta).c_str());
}

Progress::Style Progress::styleFor(bool quiet) {
  if (quiet)
    return Style::Quiet;
  return ::isatty(STDERR_FILENO) ? Style::Bar : Style::Lines;
}

Progress::Progress(Style style, int64_t totalSteps, int64_t firstStep)
    : style_(style), totalSteps_(totalSteps), firstStep_(firstStep) {}

void Progress::message(const std::string &line) {
  if (style_ == Style::Quiet)
    return;
  if (barDrawn_) {
    // Clears the bar; the next step draws it again below the message.
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    barDrawn_ = false;
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void Progress::step(const StepMetrics &metrics, double elapsedS) {
  switch (style_) {
  case Style::Quiet:
    return;
  case Style::Lines:
    std::printf("%s\n", formatStepLine(metrics, totalSteps_).c_str());
    std::fflush(stdout);
    return;
  case Style::Bar:
    // \r and clear-to-end-of-line redraw the bar in place.
    std::fprintf(
        stderr, "\r%s\033[K",
        formatProgressBar(metrics, totalSteps_, elapsedS, 30, firstStep_)
            .c_str());
    std::fflush(stderr);
    barDrawn_ = true;
    return;
  }
}

void Progress::finish(const StepMetrics &last, int64_t steps, double elapsedS,
                      int64_t tokens) {
  if (style_ == Style::Quiet)
    return;
  if (barDrawn_)
    std::fputc('\n', stderr);
  double tokensPerS = elapsedS > 0 ? static_cast<double>(tokens) / elapsedS : 0;
  // The plan's prediction next to the measured peak (both backends measure).
  std::string planned;
  if (last.plannedBytes > 0 && last.plannedBytes != last.peakBytes)
    planned = " (planned " + rt::support::formatBytes(last.plannedBytes) + ")";
  std::printf("plan-run: %lld steps in %.1f s, final loss %.4f, %.0f tok/s, "
              "peak %s on rank 0%s\n",
              static_cast<long long>(steps), elapsedS, last.loss, tokensPerS,
              rt::support::formatBytes(last.peakBytes).c_str(),
              planned.c_str());
  std::fflush(stdout);
}

} // namespace plan::run
