//===- SvgToPng.h - planc --timeline=FILE.png -------------------*- C++ -*-===//
//
// The timeline picture as PNG: the SVG that report/Timeline.cpp writes,
// rendered by librsvg onto a cairo surface. planc only: the compiler's
// libraries do not depend on librsvg, and planc builds without it (then a
// .png timeline is a one-line error).
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_TOOLS_PLANC_SVGTOPNG_H
#define PLAN_TOOLS_PLANC_SVGTOPNG_H

#include <string>
#include <string_view>

namespace plan {

/// Why this planc cannot render PNG (built without librsvg), or nullptr.
const char *whyNoPng();

/// Renders `svg` at `scale` times its size into PNG bytes in `png`; false,
/// with `error` set, when it cannot (no librsvg, or librsvg's message).
bool renderSvgToPng(std::string_view svg, double scale, std::string &png,
                    std::string &error);

} // namespace plan

#endif // PLAN_TOOLS_PLANC_SVGTOPNG_H
