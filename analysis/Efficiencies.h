//===- Efficiencies.h - Fractions of a peak the time model takes *- C++ -*-===//
//
// The time model's two efficiencies (docs/report.md, "Constants"), in a
// header without MLIR so that `plan-run --calibrate`, which turns measured
// rates back into the peaks the model takes, uses the same numbers.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_ANALYSIS_EFFICIENCIES_H
#define PLAN_ANALYSIS_EFFICIENCIES_H

namespace plan {

/// Fraction of the device's dense peak that forward, backward and recompute
/// reach.
constexpr double kComputeEfficiency = 0.5;

/// The fraction of a link's (or memory's) peak bandwidth a well-tuned
/// transfer reaches.
constexpr double kBandwidthEfficiency = 0.8;

} // namespace plan

#endif // PLAN_ANALYSIS_EFFICIENCIES_H
