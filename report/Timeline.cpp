//===- Timeline.cpp - Rank 0's predicted step as one SVG picture ----------===//
//
// `planc --timeline step.svg` (docs/report.md, "Timeline"): the slices of
// the time model (the same as `--trace`) as boxes in one lane per stream,
// the compute stream's waits for communication or copies marked as exposed,
// and under them the memory curve of each arena over the step
// (SpaceMemory::liveAtOp at StepTime::opStart) with the planned arena, the
// peak and what is live at the peak. Plain SVG 1.1 text, no library: every
// element carries a class (`lane`, `op`, `exposed`, `memory`, `peak`) and
// every box a <title> (its op and times) that a viewer shows on hover.
//
//===----------------------------------------------------------------------===//

#include "report/Report.h"

#include "runtime/support/Format.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>

using namespace plan;
using plan::rt::support::formatBytes;

namespace {

// Layout, in SVG user units (pixels at 100%).
constexpr double kWidth = 1200;
constexpr double kLeft = 120; // lane labels
constexpr double kRight = 20;
constexpr double kTop = 56; // title
constexpr double kLaneHeight = 26;
constexpr double kLaneGap = 6;
constexpr double kAxisHeight = 28;
constexpr double kMemoryHeight = 150;
constexpr double kBottom = 70; // peak breakdown
// A 10-unit sans-serif glyph is about this wide.
constexpr double kCharWidth = 6.0;

/// `text` as XML character data or an attribute value.
std::string escape(llvm::StringRef text) {
  std::string out;
  llvm::raw_string_ostream os(out);
  llvm::printHTMLEscaped(text, os);
  return out;
}

/// A tick spacing of 1, 2 or 5 x 10^k that gives about `count` ticks.
double tickStep(double span, int count) {
  double raw = span / count;
  double base = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (base * m >= raw)
      return base * m;
  return base * 10;
}

/// `name` cut to what fits in `width` units, with an ellipsis; empty when
/// not even three characters fit.
std::string fitted(const std::string &name, double width) {
  size_t fits = static_cast<size_t>((width - 4) / kCharWidth);
  if (fits >= name.size())
    return name;
  if (fits < 4)
    return "";
  return name.substr(0, fits - 1) + "\u2026";
}

const char *fillOf(Stream stream) {
  switch (stream) {
  case Stream::Compute:
    return "#4e79a7";
  case Stream::Comm:
    return "#f28e2b";
  case Stream::HostToDevice:
    return "#59a14f";
  case Stream::DeviceToHost:
    return "#76b7b2";
  case Stream::Network:
    return "#b07aa1";
  }
  return "#999999";
}

const char *laneTitle(Stream stream) {
  switch (stream) {
  case Stream::Compute:
    return "compute";
  case Stream::Comm:
    return "in-node comm";
  case Stream::HostToDevice:
    return "host \u2192 device";
  case Stream::DeviceToHost:
    return "device \u2192 host";
  case Stream::Network:
    return "network comm";
  }
  return "?";
}

} // namespace

void plan::writeTimelineSvg(const ScheduleReport &r, llvm::raw_ostream &os) {
  // Under pipeline parallelism the slowest stage's program, its step with
  // the bubble, and its own memory.
  const StepTime &time = r.time;
  const MemoryReport &memory =
      r.stages.empty() ? r.memory : r.stages[r.slowestStage].memory;
  double span = time.stepSeconds;
  for (const TimelineSlice &slice : time.slices)
    span = std::max(span, slice.start + slice.duration);
  if (span <= 0)
    span = 1e-6;
  const double plotWidth = kWidth - kLeft - kRight;
  auto x = [&](double seconds) { return kLeft + seconds / span * plotWidth; };

  // The compute lane always; the others where an op runs on them.
  std::vector<Stream> lanes = {Stream::Compute};
  for (Stream s : {Stream::Comm, Stream::Network, Stream::HostToDevice,
                   Stream::DeviceToHost})
    if (std::any_of(time.slices.begin(), time.slices.end(),
                    [&](const TimelineSlice &t) { return t.stream == s; }))
      lanes.push_back(s);
  auto laneY = [&](Stream s) {
    size_t i = std::find(lanes.begin(), lanes.end(), s) - lanes.begin();
    return kTop + static_cast<double>(i) * (kLaneHeight + kLaneGap);
  };
  const double lanesBottom =
      kTop + static_cast<double>(lanes.size()) * (kLaneHeight + kLaneGap);
  const double memoryTop = lanesBottom + kAxisHeight + 20;
  const double memoryBottom = memoryTop + kMemoryHeight;
  const double height = memoryBottom + kAxisHeight + kBottom;

  os << llvm::formatv(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
      "width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"10\">\n",
      kWidth, height);
  os << "<style>.op:hover{stroke:#000;stroke-width:1}</style>\n";
  os << llvm::formatv("<rect width=\"{0}\" height=\"{1}\" fill=\"#fff\"/>\n",
                      kWidth, height);
  // Title: what the picture is of, and its totals.
  os << llvm::formatv(
      "<text class=\"title\" x=\"{0}\" y=\"20\" font-size=\"14\" "
      "font-weight=\"bold\">{1}: rank 0, one step on {2} x {3} {4}</text>\n",
      kLeft, escape(r.planName), r.nodes, r.gpusPerNode, escape(r.deviceName));
  os << llvm::formatv(
      "<text class=\"summary\" x=\"{0}\" y=\"38\">step {1} predicted; "
      "compute {2}; communication {3} ({4} exposed); copies exposed {5}; "
      "MFU {6:F1}%</text>\n",
      kLeft, escape(formatSeconds(time.stepSeconds)),
      escape(formatSeconds(time.computeSeconds + time.memoryBoundSeconds)),
      escape(formatSeconds(time.commBusySeconds())),
      escape(formatSeconds(time.exposedCommSeconds)),
      escape(formatSeconds(time.exposedCopySeconds)), time.mfu * 100);

  // Lanes, each a group of its boxes.
  for (Stream s : lanes) {
    double y = laneY(s);
    std::string id = streamName(s).str();
    os << llvm::formatv("<g class=\"lane\" id=\"lane-{0}\">\n", id);
    os << llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" "
                        "height=\"{3}\" fill=\"#f4f4f4\"/>\n",
                        kLeft, y, plotWidth, kLaneHeight);
    os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" text-anchor=\"end\" "
                        "font-size=\"11\">{2}</text>\n",
                        kLeft - 8, y + kLaneHeight / 2 + 4, laneTitle(s));
    for (const TimelineSlice &slice : time.slices) {
      if (slice.stream != s)
        continue;
      bool exposed = slice.exposed;
      double x0 = x(slice.start);
      double w = std::max(0.5, x(slice.start + slice.duration) - x0);
      os << llvm::formatv(
          "<rect class=\"op{0}\" x=\"{1:F2}\" y=\"{2}\" width=\"{3:F2}\" "
          "height=\"{4}\" fill=\"{5}\" stroke=\"#fff\" stroke-width=\"0.5\">"
          "<title>{6} \u2014 {7} from {8}</title></rect>\n",
          exposed ? " exposed" : "", x0, y, w, kLaneHeight,
          exposed ? "#e15759" : fillOf(s), escape(slice.name),
          escape(formatSeconds(slice.duration)),
          escape(formatSeconds(slice.start)));
      std::string label = fitted(slice.name, w);
      if (!label.empty())
        os << llvm::formatv("<text x=\"{0:F2}\" y=\"{1}\" fill=\"#fff\" "
                            "pointer-events=\"none\">{2}</text>\n",
                            x0 + 2, y + kLaneHeight / 2 + 3, escape(label));
    }
    os << "</g>\n";
  }

  // The time axis, under the lanes and under the memory curve.
  double step = tickStep(span, 10);
  auto axis = [&](double y) {
    os << llvm::formatv("<g class=\"axis\"><line x1=\"{0}\" y1=\"{1}\" "
                        "x2=\"{2}\" y2=\"{1}\" stroke=\"#333\"/>\n",
                        kLeft, y, kLeft + plotWidth);
    for (double t = 0; t <= span * (1 + 1e-9); t += step)
      os << llvm::formatv("<line x1=\"{0:F2}\" y1=\"{1}\" x2=\"{0:F2}\" "
                          "y2=\"{2}\" stroke=\"#333\"/><text x=\"{0:F2}\" "
                          "y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
                          x(t), y, y + 4, y + 15, escape(formatSeconds(t)));
    os << "</g>\n";
  };
  axis(lanesBottom + 2);

  // The memory curve of each arena, with the planned arena and the peak.
  const SpaceMemory &device = memory.device();
  // analyzeSchedule gives a used space one entry per op, as opStart.
  auto hasCurve = [&](const SpaceMemory &space) {
    return space.used && !space.liveAtOp.empty() &&
           space.liveAtOp.size() == time.opStart.size();
  };
  uint64_t top = 1;
  for (const SpaceMemory &space : memory.spaces)
    if (hasCurve(space)) {
      top = std::max(top, space.arenaBytes);
      for (uint64_t b : space.liveAtOp)
        top = std::max(top, b);
    }
  auto y = [&](uint64_t bytes) {
    return memoryBottom - static_cast<double>(bytes) /
                              static_cast<double>(top) * kMemoryHeight;
  };
  os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" text-anchor=\"end\" "
                      "font-size=\"11\">memory</text>\n",
                      kLeft - 8, memoryTop + 10);
  os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" text-anchor=\"end\">{2}"
                      "</text>\n",
                      kLeft - 8, memoryTop + 24, escape(formatBytes(top)));
  os << llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\" "
                      "fill=\"none\" stroke=\"#ccc\"/>\n",
                      kLeft, memoryTop, plotWidth, kMemoryHeight);
  const char *colours[kNumMemorySpaces] = {"#4e79a7", "#59a14f", "#b07aa1"};
  double legendX = kLeft + 8;
  for (int i = 0; i < kNumMemorySpaces; ++i) {
    const SpaceMemory &space = memory.spaces[i];
    if (!hasCurve(space))
      continue;
    std::string name =
        sched::stringifyMemorySpace(static_cast<sched::MemorySpace>(i)).str();
    // A step function: the bytes live at an op hold until the next op.
    std::string points;
    for (size_t k = 0; k < space.liveAtOp.size(); ++k) {
      double next = k + 1 < time.opStart.size() ? time.opStart[k + 1] : span;
      double v = y(space.liveAtOp[k]);
      points += llvm::formatv("{0:F2},{1:F2} {2:F2},{1:F2} ",
                              x(time.opStart[k]), v, x(next))
                    .str();
    }
    os << llvm::formatv("<polyline class=\"memory\" id=\"memory-{0}\" "
                        "fill=\"none\" stroke=\"{1}\" stroke-width=\"1.5\" "
                        "points=\"{2}\"/>\n",
                        name, colours[i], points);
    os << llvm::formatv(
        "<line class=\"arena\" x1=\"{0}\" y1=\"{1:F2}\" x2=\"{2}\" "
        "y2=\"{1:F2}\" stroke=\"{3}\" stroke-dasharray=\"4 3\"/>\n",
        kLeft, y(space.arenaBytes), kLeft + plotWidth, colours[i]);
    os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" fill=\"{2}\">{3}: live "
                        "bytes (line), planned arena {4} (dashed)</text>\n",
                        legendX, memoryTop + 12 + 12 * i, colours[i], name,
                        escape(formatBytes(space.arenaBytes)));
  }
  // The device's peak: where, how much, and of what.
  if (hasCurve(device)) {
    size_t at = device.peakOp;
    double px = x(time.opStart[at]), py = y(device.liveAtOp[at]);
    os << llvm::formatv("<g class=\"peak\"><circle cx=\"{0:F2}\" "
                        "cy=\"{1:F2}\" r=\"4\" fill=\"#e15759\"/>\n",
                        px, py);
    std::string what;
    for (int c = 0; c < kNumMemoryCategories; ++c)
      if (device.atPeak[c] > 0)
        what += (what.empty() ? "" : ", ") +
                memoryCategoryName(static_cast<MemoryCategory>(c)).str() + " " +
                formatBytes(device.atPeak[c]);
    double textY = memoryBottom + kAxisHeight + 20;
    os << llvm::formatv(
        "<text x=\"{0}\" y=\"{1}\" font-size=\"11\">device peak {2} live "
        "at `{3}` ({4} into the step)</text>\n",
        kLeft, textY, escape(formatBytes(device.livePeakBytes)),
        escape(device.peakAt), escape(formatSeconds(time.opStart[at])));
    os << llvm::formatv(
        "<text x=\"{0}\" y=\"{1}\" font-size=\"11\">at the peak, with the "
        "arena's packing slack as other: {2}; workspace {3} outside the "
        "arena</text></g>\n",
        kLeft, textY + 16, escape(what),
        escape(formatBytes(memory.workspaceBytes)));
  }
  axis(memoryBottom + 2);
  os << "</svg>\n";
}
