//===- Search.h - The auto-planner: make it fit, then make it fast -*- C++
//-*-===//
//
// `planc PLAN --search` (docs/planner.md). Keeps the plan's model, cluster
// and recipe and the global batch, and searches the settings a user would
// otherwise guess: sharding (and the shard groups of hybrid_shard), where
// each state lives (offload), activation checkpointing, micro-batch x
// gradient accumulation, the gradient layout of mixed precision, prefetch
// and when gradients are reduced. A candidate must fit (the device's arena +
// workspace + reserve, and the host memory of a node) and keep the global
// batch exactly; the fastest predicted step wins.
//
// Every number comes from the analysis `planc --report` prints: a candidate
// is the plan with `--set` overrides, lowered by the whole pipeline and
// analyzed. Nothing here models cost. What makes the search fast:
//  - Candidates are lowered with 4, 5 and 6 layers and the report's numbers
//    extended along the line through them to the model's layer count, when
//    all three lie on one line (every layer adds the same ops); otherwise
//    the candidate is lowered whole (always with a pipeline, whose stage
//    partition and bubble change with the layers and micro-batches; its
//    degree, schedule and stages, like the tensor degree, stay as given).
//    With 8 or more micro-batches a step,
//    they are lowered with 2 and 3 (and 4, at 4 layers or the plan's own,
//    to check the line) and extended bilinearly: the lowering's cost no
//    longer grows with the accumulation a smaller micro-batch needs. The
//    whole plan is always loaded and checked. The live peak is a maximum of
//    sums that each grow linearly with the layers, so its line over layers
//    is a lower bound (over micro-batches it is checked, not proven); the
//    arena adds the packing slack of the 6-layer plan. A candidate whose
//    estimate is within 5% of the device's memory, and every candidate shown,
//    is lowered whole.
//  - A candidate that needs at least as much device memory as one that did
//    not fit (same gradient layout, no more sharding, offload or
//    checkpointing, no smaller micro-batch) is not lowered.
//  - Offloading a state never makes a step faster in the time model, so
//    supersets of an offload set that fits are not lowered.
// `exhaustive` lowers every candidate (tests compare the two), and checks
// each extension against the whole lowering (SearchStats::check).
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_REPORT_SEARCH_H
#define PLAN_REPORT_SEARCH_H

#include "frontend/Diagnostics.h"
#include "frontend/PlanSpec.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace plan {

/// One point of the search space: the settings the search changes.
struct SearchKnobs {
  Sharding sharding = Sharding::NoShard;
  int64_t replicate = 1, shard = 1; // the data-parallel mesh
  OffloadSpec offload;
  Checkpointing checkpointing = Checkpointing::None;
  int64_t microBatch = 1, gradAccum = 1;
  /// Mixed precision only: fp32 or the working type.
  std::optional<DType> gradDtype;
  Prefetch backwardPrefetch = Prefetch::Pre;
  bool forwardPrefetch = false;
  /// Gathered units in flight at once (parameters gathered per unit).
  int64_t maxInflightGathers = 2;
  GradSync gradSync = GradSync::EveryMicroBatch;
  bool operator==(const SearchKnobs &) const = default;

  /// The settings a loaded plan has.
  static SearchKnobs of(const PlanSpec &spec);
  /// The `--set` overrides that give a plan these settings (every one
  /// spelled out, derived defaults included).
  std::vector<std::string> overrides(int64_t globalBatch) const;
  /// "full_shard", "hybrid_shard (16 x 8)".
  std::string shardingText() const;
  /// "none", "optimizer", "params+grads+optimizer".
  std::string offloadText() const;
};

/// The report's numbers for one candidate.
struct SearchMetrics {
  /// False when the plan's checks reject the candidate (`invalid` says why,
  /// as the first error would).
  bool valid = false;
  std::string invalid;
  /// Device arena + workspace + runtime reserve, and the device's memory.
  /// Extrapolated, the need is an estimate (the live peak plus the packing
  /// slack of the largest short plan) and `deviceLowerBytes` what it is at
  /// least (the live peak); whole, the two are equal.
  uint64_t deviceNeedBytes = 0, deviceLowerBytes = 0, deviceCapacityBytes = 0;
  uint64_t hostBytesPerNode = 0, hostCapacityBytes = 0;
  double stepSeconds = 0, computeSeconds = 0, exposedCommSeconds = 0;
  double exposedCopySeconds = 0, tokensPerSecond = 0, mfu = 0;
  /// From a whole lowering (not extended from shorter plans).
  bool exact = false;

  bool deviceFits() const { return deviceNeedBytes <= deviceCapacityBytes; }
  bool hostFits() const { return hostBytesPerNode <= hostCapacityBytes; }
  bool fits() const { return valid && deviceFits() && hostFits(); }
};

struct SearchCandidate {
  SearchKnobs knobs;
  SearchMetrics metrics;
  /// For the candidates a result shows: the `--set` overrides that turn the
  /// plan as given into this one (changedOverrides).
  std::vector<std::string> changes;
};

/// Why the winner has one of its settings: every other value of that
/// setting, the rest of the winner kept, and what it would cost.
struct KnobReason {
  std::string knob;   // "sharding", "offload", ...
  std::string chosen; // "full_shard"
  /// "no_shard: does not fit: needs 213.4 GiB of 80.00 GiB",
  /// "hybrid_shard (128 x 8): 4.1% slower (34.52 s)".
  std::vector<std::string> alternatives;
};

struct SearchOptions {
  unsigned top = 5;
  /// Sequences per optimizer step; 0: the plan's (train.global_batch, or
  /// micro_batch x grad_accum x ranks).
  int64_t globalBatch = 0;
  /// Lower every candidate whole, with no pruning (for tests).
  bool exhaustive = false;
};

struct SearchStats {
  int64_t spaceSize = 0;      // candidates the knobs span
  int64_t evaluated = 0;      // candidates analyzed (lowered or extrapolated)
  int64_t lowerings = 0;      // whole pipelines run, reduced ones included
  int64_t extrapolated = 0;   // candidates extended from short plans
  int64_t invalid = 0;        // candidates the plan's checks reject
  int64_t prunedMemory = 0;   // not lowered: needs more than a failed one
  int64_t prunedOffload = 0;  // not lowered: offloads more than a fitting one
  int64_t estimatedToFit = 0; // extrapolated to fit, did not when whole
  double seconds = 0;

  /// With `exhaustive`: every candidate the search would have extended,
  /// extended and lowered whole, compared.
  struct ExtensionCheck {
    int64_t candidates = 0;
    double maxStepError = 0; // |extended - whole| / whole, of the step
    double maxNeedError = 0; // the same, of the device need
    /// Candidates whose extended lower bound on the device need is above
    /// the whole plan's need (the bound failed): 0 when it holds.
    int64_t boundFailures = 0;
  } check;
};

struct SearchResult {
  std::string planName;
  int64_t globalBatch = 0, seqLen = 0, worldSize = 0;
  int64_t pipeline = 1; // the plan's stages, kept by every candidate
  /// Fitting candidates, fastest first; their numbers from whole lowerings.
  std::vector<SearchCandidate> best;
  /// When nothing fits: the candidate that misses by the least.
  std::optional<SearchCandidate> closest;
  /// For best[0].
  std::vector<KnobReason> why;
  /// The plan as given (with planc's --set), analyzed whole.
  std::optional<SearchCandidate> given;
  SearchStats stats;
};

/// Searches the plan in buffer `bufferId` of `sourceMgr` (with `overrides`
/// applied first, as planc's --set). The plan itself must be valid: its
/// errors are reported through `diag` and nothing is returned, as is a
/// global batch that no candidate can keep (with the nearest that can).
std::optional<SearchResult>
searchPlan(llvm::SourceMgr &sourceMgr, unsigned bufferId,
           llvm::ArrayRef<std::string> overrides, llvm::StringRef name,
           const SearchOptions &options, DiagEmitter &diag);

/// The `--set` overrides that turn the plan as given into `knobs` with
/// `globalBatch` sequences a step: only the keys whose value changes,
/// derived defaults left to derive.
std::vector<std::string> changedOverrides(const PlanSpec &given,
                                          const SearchKnobs &knobs,
                                          int64_t globalBatch);

/// The table `planc --search` prints.
void printSearchTable(const SearchResult &result, llvm::raw_ostream &os);
/// The same as one JSON object (`--search=json`; keys in docs/planner.md).
llvm::json::Value searchToJson(const SearchResult &result);

} // namespace plan

#endif // PLAN_REPORT_SEARCH_H
