//===- Search.cpp - The auto-planner: make it fit, then make it fast ------===//
//
// docs/planner.md. Search.h says what is searched and what makes it fast.
//
//===----------------------------------------------------------------------===//

#include "report/Search.h"

#include "frontend/Frontend.h"
#include "report/Lowerings.h"
#include "report/Report.h"

#include "Format.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <type_traits>

using namespace mlir;
using namespace plan;
using plan::rt::support::formatBytes;

//===----------------------------------------------------------------------===//
// Knobs
//===----------------------------------------------------------------------===//

static std::string meshText(int64_t replicate, int64_t shard) {
  return llvm::formatv("({0}, {1})", replicate, shard).str();
}

std::vector<std::string> SearchKnobs::overrides(int64_t globalBatch) const {
  auto place = [](MemorySpace space) { return stringify(space).str(); };
  std::vector<std::string> sets = {
      "parallel.sharding=" + stringify(sharding).str(),
      "parallel.mesh=" + meshText(replicate, shard),
      "parallel.offload.params=" + place(offload.params),
      "parallel.offload.grads=" + place(offload.grads),
      "parallel.offload.optimizer=" + place(offload.optimizer),
      // A plan that names optimizer_step keeps it with its offload.
      "parallel.optimizer_step=" + place(offload.optimizer),
      "parallel.backward_prefetch=" + stringify(backwardPrefetch).str(),
      std::string("parallel.forward_prefetch=") +
          (forwardPrefetch ? "true" : "false"),
      "parallel.max_inflight_gathers=" + std::to_string(maxInflightGathers),
      "parallel.grad_sync=" + stringify(gradSync).str(),
      "train.activation_checkpointing=" + stringify(checkpointing).str(),
      "train.micro_batch=" + std::to_string(microBatch),
      "train.grad_accum=" + std::to_string(gradAccum),
      "train.global_batch=" + std::to_string(globalBatch)};
  if (gradDtype)
    sets.push_back("train.grad_dtype=" + stringify(*gradDtype).str());
  return sets;
}

std::string SearchKnobs::shardingText() const {
  if (sharding == Sharding::HybridShard)
    return llvm::formatv("hybrid_shard {0}x{1}", replicate, shard).str();
  return stringify(sharding).str();
}

std::string SearchKnobs::offloadText() const {
  std::string states = offloadedStates(offload);
  return states.empty() ? "none" : states;
}

/// The values of max_inflight_gathers the search tries (2, FSDP's
/// limit_all_gathers, is the language's default).
constexpr int64_t kInflightGathers[] = {1, 2, 3};

/// Parameters gathered per unit: the strategies prefetch applies to.
static bool gathersPerUnit(Sharding sharding) {
  return sharding == Sharding::FullShard || sharding == Sharding::HybridShard;
}

/// Everything but the time-only knobs (prefetch, grad_sync): what the main
/// phase searches and the table shows one row of.
static SearchKnobs structureOf(SearchKnobs knobs, const SearchKnobs &given) {
  knobs.backwardPrefetch = given.backwardPrefetch;
  knobs.forwardPrefetch = given.forwardPrefetch;
  knobs.maxInflightGathers = given.maxInflightGathers;
  knobs.gradSync = given.gradSync;
  return knobs;
}

static std::string keyOf(const SearchKnobs &k) {
  return llvm::formatv(
             "{0}|{1}x{2}|{3}{4}{5}|{6}|{7}x{8}|{9}|{10}|{11}|{12}|{13}",
             static_cast<int>(k.sharding), k.replicate, k.shard,
             static_cast<int>(k.offload.params),
             static_cast<int>(k.offload.grads),
             static_cast<int>(k.offload.optimizer),
             static_cast<int>(k.checkpointing), k.microBatch, k.gradAccum,
             k.gradDtype ? static_cast<int>(*k.gradDtype) : -1,
             static_cast<int>(k.backwardPrefetch),
             static_cast<int>(k.forwardPrefetch), static_cast<int>(k.gradSync),
             k.maxInflightGathers)
      .str();
}

//===----------------------------------------------------------------------===//
// Evaluating a candidate
//===----------------------------------------------------------------------===//

namespace {

/// The report's numbers that are extrapolated over layers and micro-batches.
/// Bytes are exact integers; times, FLOPs and tokens doubles.
struct Extensive {
  int64_t arena = 0, livePeak = 0, workspace = 0; // device
  int64_t hostBytesPerNode = 0;
  double step = 0, compute = 0, exposedComm = 0, exposedCopy = 0, flops = 0;
  double tokens = 0;

  /// Calls `f` on each field's pointer (the arena excepted: packing is not
  /// linear, and the extrapolation adds it as slack over the live peak).
  template <typename F> static void forEachLinear(F &&f) {
    f(&Extensive::livePeak);
    f(&Extensive::workspace);
    f(&Extensive::hostBytesPerNode);
    f(&Extensive::step);
    f(&Extensive::compute);
    f(&Extensive::exposedComm);
    f(&Extensive::exposedCopy);
    f(&Extensive::flops);
    f(&Extensive::tokens);
  }

  /// Whether a, b, c (at x, x + 1, x + 2) lie on one line: bytes exactly,
  /// doubles to 1e-9 of their size.
  static bool affine(const Extensive &a, const Extensive &b,
                     const Extensive &c) {
    bool on = true;
    forEachLinear([&](auto Extensive::*field) {
      if constexpr (std::is_same_v<decltype(a.*field), const int64_t &>) {
        on &= c.*field - b.*field == b.*field - a.*field;
      } else {
        double x = a.*field, y = b.*field, z = c.*field;
        double scale = std::max({std::fabs(x), std::fabs(y), std::fabs(z)});
        on &= std::fabs((z - y) - (y - x)) <= 1e-9 * scale + 1e-15;
      }
    });
    return on;
  }

  /// The line through b (at x) and c (at x + 1), at x + 1 + `more`; the
  /// arena is the live peak plus the slack packing left at c.
  static Extensive extend(const Extensive &b, const Extensive &c,
                          int64_t more) {
    Extensive e;
    forEachLinear([&](auto Extensive::*field) {
      e.*field = c.*field + more * (c.*field - b.*field);
    });
    e.arena = e.livePeak + (c.arena - c.livePeak);
    return e;
  }
};

/// A candidate whose extrapolated need is within this fraction of the
/// device's memory is lowered whole before it counts as fitting: the arena
/// is packed, and packing is not linear in layers.
constexpr double kExactMargin = 0.05;

/// Lowers candidates in one MLIRContext, quietly, and caches what it found.
class Evaluator {
public:
  Evaluator(llvm::SourceMgr &sourceMgr, unsigned bufferId,
            llvm::ArrayRef<std::string> base, llvm::StringRef name,
            int64_t layers, bool pipelined, int64_t globalBatch,
            bool checkExtensions, SearchStats &stats)
      : sourceMgr(sourceMgr), bufferId(bufferId), base(base), name(name),
        layers(layers), pipelined(pipelined), globalBatch(globalBatch),
        checkExtensions(checkExtensions), stats(stats),
        quiet(&context, [this](Diagnostic &diag) {
          if (diag.getSeverity() == DiagnosticSeverity::Error &&
              firstError.empty())
            firstError = diag.str();
          return success();
        }) {
    context.disableMultithreading();
  }

  /// The candidate's numbers: extended over layers where the short plans
  /// lie on one line and the need is not within kExactMargin of the
  /// device's memory, else (or with `exact`) from the whole plan lowered.
  const SearchMetrics &evaluate(const SearchKnobs &knobs, bool exact) {
    std::string key = keyOf(knobs);
    auto it = cache.find(key);
    if (it != cache.end() && (!exact || it->second.exact || !it->second.valid))
      return it->second;
    bool counted = it != cache.end();
    SearchMetrics metrics = exact ? whole(knobs) : reduced(knobs);
    if (exact && checkExtensions && metrics.valid && extends(knobs))
      compareExtension(knobs, metrics);
    if (!metrics.exact && metrics.valid &&
        metrics.deviceLowerBytes <= metrics.deviceCapacityBytes &&
        metrics.deviceNeedBytes >
            (1 - kExactMargin) * double(metrics.deviceCapacityBytes))
      metrics = whole(knobs);
    if (!counted) {
      ++stats.evaluated;
      if (!metrics.valid)
        ++stats.invalid;
      else if (!metrics.exact)
        ++stats.extrapolated;
    }
    return cache[key] = std::move(metrics);
  }

  /// The plan with `extra` overrides after the command line's, lowered and
  /// analyzed; nothing (and the first error kept) when it is rejected.
  /// MLIR's structural verifier does not run after every pass (two thirds
  /// of a lowering's time): the pipeline is the one planc runs with it,
  /// and the search's own checks (sched-verify-schedule, the report's
  /// analysis) still run on every candidate.
  /// Each plan gets a SourceMgr of its own over the same text: every
  /// `--set` adds a buffer, and one manager for thousands of candidates
  /// would grow without end.
  std::optional<ScheduleReport> run(llvm::ArrayRef<std::string> extra) {
    std::optional<PlanSpec> spec = load(extra);
    if (!spec)
      return std::nullopt;
    ++stats.lowerings;
    return reportOfLowering(*spec, context, /*verifyEachPass=*/false);
  }

  /// The plan with `extra` overrides, loaded and checked, not lowered.
  std::optional<PlanSpec> load(llvm::ArrayRef<std::string> extra) {
    std::vector<std::string> sets(base.begin(), base.end());
    sets.insert(sets.end(), extra.begin(), extra.end());
    firstError.clear();
    llvm::SourceMgr local;
    local.setIncludeDirs(sourceMgr.getIncludeDirs());
    local.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBuffer(
            sourceMgr.getMemoryBuffer(bufferId)->getMemBufferRef(),
            /*RequiresNullTerminator=*/false),
        llvm::SMLoc());
    DiagEmitter diag(&context, &local, UnknownLoc::get(&context));
    return loadPlan(local, 1, sets, name, diag);
  }

private:
  static Extensive extensive(const ScheduleReport &r) {
    Extensive e;
    e.arena = static_cast<int64_t>(r.memory.device().arenaBytes);
    e.livePeak = static_cast<int64_t>(r.memory.device().livePeakBytes);
    e.workspace = static_cast<int64_t>(r.memory.workspaceBytes);
    e.hostBytesPerNode = static_cast<int64_t>(r.memory.hostBytesPerNode);
    e.step = r.time.stepSeconds;
    e.compute = r.time.computeSeconds;
    e.exposedComm = r.time.exposedCommSeconds;
    e.exposedCopy = r.time.exposedCopySeconds;
    e.flops = r.time.modelFlops;
    e.tokens = r.time.tokensPerStep;
    return e;
  }

  /// The metrics of `e` for a plan whose report is `r` (the fixed parts:
  /// capacities, tokens per step, the device's peak). `lowerArena`: what
  /// the arena needs at least (the live peak when extrapolated).
  static SearchMetrics metricsOf(const Extensive &e, int64_t lowerArena,
                                 const ScheduleReport &r) {
    auto bytes = [](int64_t n) {
      return static_cast<uint64_t>(std::max<int64_t>(n, 0));
    };
    SearchMetrics m;
    m.valid = true;
    m.deviceNeedBytes =
        bytes(e.arena + e.workspace) + r.memory.deviceReserveBytes;
    m.deviceLowerBytes =
        bytes(lowerArena + e.workspace) + r.memory.deviceReserveBytes;
    m.deviceCapacityBytes = r.memory.deviceCapacityBytes;
    m.hostBytesPerNode = bytes(e.hostBytesPerNode);
    m.hostCapacityBytes = r.memory.hostCapacityBytes;
    m.stepSeconds = e.step;
    m.computeSeconds = e.compute;
    m.exposedCommSeconds = e.exposedComm;
    m.exposedCopySeconds = e.exposedCopy;
    if (e.step > 0) {
      m.tokensPerSecond = e.tokens / e.step;
      if (r.time.peakFlops > 0)
        m.mfu = e.flops / (e.step * r.time.peakFlops);
    }
    return m;
  }

  SearchMetrics invalidMetrics() const {
    SearchMetrics m;
    m.invalid = firstError.empty() ? "rejected by the plan's checks"
                                   : rt::support::oneLine(firstError);
    return m;
  }

  SearchMetrics whole(const SearchKnobs &knobs) {
    std::optional<ScheduleReport> report = run(knobs.overrides(globalBatch));
    if (!report)
      return invalidMetrics();
    Extensive e = extensive(*report);
    SearchMetrics m = metricsOf(e, e.arena, *report);
    m.exact = true;
    return m;
  }

  /// Whether reduced() lowers `knobs` with fewer layers, and with fewer
  /// micro-batches; extends() when either. A pipeline's candidates are
  /// lowered whole: its stages' partition and its bubble change with both.
  bool cutsLayers() const { return !pipelined && layers > kFirst + 3; }
  bool cutsAccum(const SearchKnobs &knobs) const {
    return !pipelined && knobs.gradAccum >= kCutAccum;
  }
  bool extends(const SearchKnobs &knobs) const {
    return cutsLayers() || cutsAccum(knobs);
  }

  /// Adds to stats.check how far `knobs`'s extended numbers are from
  /// `exact`, those of its whole lowering.
  void compareExtension(const SearchKnobs &knobs, const SearchMetrics &exact) {
    std::optional<SearchMetrics> found = extendedMetrics(knobs);
    if (!found)
      return;
    const SearchMetrics &extended = *found;
    SearchStats::ExtensionCheck &c = stats.check;
    ++c.candidates;
    auto error = [](double x, double of) {
      return of != 0 ? std::fabs(x - of) / of : std::fabs(x);
    };
    c.maxStepError = std::max(c.maxStepError,
                              error(extended.stepSeconds, exact.stepSeconds));
    c.maxNeedError =
        std::max(c.maxNeedError, error(double(extended.deviceNeedBytes),
                                       double(exact.deviceNeedBytes)));
    if (extended.deviceLowerBytes > exact.deviceNeedBytes)
      ++c.boundFailures;
  }

  /// The candidate lowered short: at kFirst..kFirst+2 layers when the
  /// model has more than kFirst + 3, and at kFirstAccum and kFirstAccum + 1
  /// micro-batches when it accumulates kCutAccum or more (lowering time
  /// grows with both: every micro-batch is unrolled). Each count of
  /// micro-batches must give numbers on one line over the layers; a third
  /// count, at kFirst layers (or the plan's own when they are not cut),
  /// must continue the line over micro-batches. The step is then a
  /// bilinear function of the two (each micro-batch repeats the layers),
  /// extended to the plan's counts. The whole plan is loaded and checked
  /// first, not lowered; when the short plans are rejected or off the line
  /// it is lowered whole.
  static constexpr int64_t kFirst = 4;
  static constexpr int64_t kFirstAccum = 2;
  static constexpr int64_t kCutAccum = 8;
  SearchMetrics reduced(const SearchKnobs &knobs) {
    if (!extends(knobs))
      return whole(knobs);
    // The whole plan's own checks first: a short plan passes limits the
    // whole one does not ((layers + 2) x grad_accum, say).
    if (!load(knobs.overrides(globalBatch)))
      return invalidMetrics();
    std::optional<SearchMetrics> extended = extendedMetrics(knobs);
    // The whole plan says why (or is valid where a short one is not).
    return extended ? *extended : whole(knobs);
  }

  /// The numbers of `knobs` extended from its short plans, or nothing when
  /// a short plan is rejected or they do not lie on one line.
  std::optional<SearchMetrics> extendedMetrics(const SearchKnobs &knobs) {
    bool cutLayers = cutsLayers();
    bool cutAccum = cutsAccum(knobs);
    std::optional<ScheduleReport> last;
    std::map<std::pair<int64_t, int64_t>, std::optional<Extensive>> points;
    auto point = [&](int64_t atLayers,
                     int64_t accum) -> std::optional<Extensive> {
      auto [it, added] = points.try_emplace({atLayers, accum});
      if (!added)
        return it->second;
      SearchKnobs k = knobs;
      k.gradAccum = accum;
      std::vector<std::string> sets =
          k.overrides(globalBatch / knobs.gradAccum * accum);
      sets.push_back("model.layers=" + std::to_string(atLayers));
      if (std::optional<ScheduleReport> report = run(sets)) {
        it->second = extensive(*report);
        last = std::move(report);
      }
      return it->second;
    };
    // The numbers at the plan's layers for `accum` micro-batches.
    auto overLayers = [&](int64_t accum) -> std::optional<Extensive> {
      if (!cutLayers)
        return point(layers, accum);
      std::array<Extensive, 3> p;
      for (int i = 0; i < 3; ++i) {
        std::optional<Extensive> e = point(kFirst + i, accum);
        if (!e)
          return std::nullopt;
        p[i] = *e;
      }
      if (!Extensive::affine(p[0], p[1], p[2]))
        return std::nullopt;
      return Extensive::extend(p[1], p[2], layers - (kFirst + 2));
    };
    std::optional<Extensive> e;
    if (!cutAccum) {
      e = overLayers(knobs.gradAccum);
    } else if (std::optional<Extensive> first = overLayers(kFirstAccum)) {
      if (std::optional<Extensive> second = overLayers(kFirstAccum + 1)) {
        int64_t at = cutLayers ? kFirst : layers;
        std::optional<Extensive> a = point(at, kFirstAccum),
                                 b = point(at, kFirstAccum + 1),
                                 c = point(at, kFirstAccum + 2);
        if (a && b && c && Extensive::affine(*a, *b, *c))
          e = Extensive::extend(*first, *second,
                                knobs.gradAccum - (kFirstAccum + 1));
      }
    }
    if (!e)
      return std::nullopt;
    // The live peak is the largest of sums that each grow linearly with the
    // layers, so its line over layers bounds it from below. Over
    // micro-batches the line is checked at a third count, not proven a
    // bound (with every check passing, the need was never above a whole
    // lowering's in --search-exhaustive's comparisons so far).
    return metricsOf(*e, e->livePeak, *last);
  }

  llvm::SourceMgr &sourceMgr;
  unsigned bufferId;
  llvm::ArrayRef<std::string> base;
  std::string name;
  int64_t layers;
  bool pipelined;
  int64_t globalBatch;
  bool checkExtensions;
  SearchStats &stats;
  MLIRContext context;
  std::string firstError;
  ScopedDiagnosticHandler quiet;
  std::map<std::string, SearchMetrics> cache;
};

//===----------------------------------------------------------------------===//
// The space
//===----------------------------------------------------------------------===//

struct Space {
  std::vector<SearchKnobs> shardings; // sharding + mesh only
  std::vector<OffloadSpec> offloads;  // fewest states first
  std::vector<Checkpointing> checkpointing;
  std::vector<std::pair<int64_t, int64_t>> batches; // (micro, accum)
  std::vector<std::optional<DType>> gradDtypes;
};

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      out.push_back(d);
      if (d != n / d)
        out.push_back(n / d);
    }
  llvm::sort(out);
  return out;
}

Space spaceOf(const PlanSpec &spec, int64_t globalBatch) {
  Space space;
  // The data-parallel ranks: the plan's tensor groups stay as they are.
  int64_t ranks = spec.parallel.dataParallelRanks(spec.cluster.worldSize());
  auto add = [&](Sharding sharding, int64_t replicate, int64_t shard) {
    SearchKnobs k;
    k.sharding = sharding;
    k.replicate = replicate;
    k.shard = shard;
    space.shardings.push_back(k);
  };
  // Most sharded first: a failure there rules out the rest (Search.h).
  if (ranks > 1) {
    add(Sharding::FullShard, 1, ranks);
    std::vector<int64_t> shards = divisors(ranks);
    for (int64_t shard : llvm::reverse(shards))
      if (shard > 1 && shard < ranks)
        add(Sharding::HybridShard, ranks / shard, shard);
    add(Sharding::ShardGradOp, 1, ranks);
    add(Sharding::Zero1, 1, ranks);
  }
  add(Sharding::NoShard, ranks, 1);

  for (int mask = 0; mask < 8; ++mask) {
    OffloadSpec o;
    o.params = mask & 1 ? MemorySpace::Host : MemorySpace::Device;
    o.grads = mask & 2 ? MemorySpace::Host : MemorySpace::Device;
    o.optimizer = mask & 4 ? MemorySpace::Host : MemorySpace::Device;
    space.offloads.push_back(o);
  }
  auto count = [](const OffloadSpec &o) {
    return (o.params == MemorySpace::Host) + (o.grads == MemorySpace::Host) +
           (o.optimizer == MemorySpace::Host);
  };
  llvm::stable_sort(space.offloads,
                    [&](const OffloadSpec &a, const OffloadSpec &b) {
                      return count(a) < count(b);
                    });
  space.checkpointing = {Checkpointing::Full, Checkpointing::None};
  int64_t perRank = globalBatch / ranks;
  for (int64_t micro : divisors(perRank))
    space.batches.push_back({micro, perRank / micro});
  if (spec.train.precision == Precision::FP32)
    space.gradDtypes = {std::nullopt};
  else
    space.gradDtypes = {workingDtype(spec.train.precision), DType::F32};
  return space;
}

bool offloadSubset(const OffloadSpec &a, const OffloadSpec &b) {
  auto le = [](MemorySpace x, MemorySpace y) {
    return x == MemorySpace::Device || y == MemorySpace::Host;
  };
  return le(a.params, b.params) && le(a.grads, b.grads) &&
         le(a.optimizer, b.optimizer);
}

/// Whether `keeps` holds at least the state `other` holds on each rank:
/// no_shard holds everything; full_shard over the world the least; a
/// hybrid_shard group of fewer ranks more than one of more.
bool keepsAtLeast(const SearchKnobs &keeps, const SearchKnobs &other) {
  if (keeps.sharding == other.sharding && keeps.shard == other.shard)
    return true;
  if (keeps.sharding == Sharding::NoShard)
    return true;
  switch (other.sharding) {
  case Sharding::FullShard:
    return true;
  case Sharding::HybridShard:
    return keeps.sharding == Sharding::HybridShard &&
           other.shard % keeps.shard == 0;
  case Sharding::ShardGradOp:
    return keeps.sharding == Sharding::Zero1;
  default:
    return false;
  }
}

/// Whether `c` needs at least the device memory `failed` needed (Search.h).
bool needsAtLeast(const SearchKnobs &c, const SearchKnobs &failed) {
  return c.gradDtype == failed.gradDtype &&
         c.backwardPrefetch == failed.backwardPrefetch &&
         c.forwardPrefetch == failed.forwardPrefetch &&
         c.maxInflightGathers == failed.maxInflightGathers &&
         c.gradSync == failed.gradSync && keepsAtLeast(c, failed) &&
         offloadSubset(c.offload, failed.offload) &&
         (failed.checkpointing == Checkpointing::Full ||
          c.checkpointing == failed.checkpointing) &&
         c.microBatch >= failed.microBatch;
}

bool faster(const SearchCandidate &a, const SearchCandidate &b) {
  if (a.metrics.stepSeconds != b.metrics.stepSeconds)
    return a.metrics.stepSeconds < b.metrics.stepSeconds;
  return a.metrics.deviceNeedBytes < b.metrics.deviceNeedBytes;
}

/// How far a candidate misses: its need over capacity, device or host.
double shortfall(const SearchMetrics &m) {
  double device = m.deviceCapacityBytes
                      ? double(m.deviceNeedBytes) / m.deviceCapacityBytes
                      : 0;
  double host = m.hostCapacityBytes
                    ? double(m.hostBytesPerNode) / m.hostCapacityBytes
                    : 0;
  return std::max(device, host);
}

std::string doesNotFit(const SearchMetrics &m) {
  if (!m.deviceFits())
    return llvm::formatv(
               "does not fit: needs {0}{1} of {2} device memory",
               m.exact ? "" : "at least ",
               formatBytes(m.exact ? m.deviceNeedBytes : m.deviceLowerBytes),
               formatBytes(m.deviceCapacityBytes))
        .str();
  return llvm::formatv("does not fit: needs {0} of {1} host memory per node",
                       formatBytes(m.hostBytesPerNode),
                       formatBytes(m.hostCapacityBytes))
      .str();
}

/// What one alternative of the winner would cost, against the winner.
std::string verdict(const SearchMetrics &m, const SearchMetrics &winner) {
  if (!m.valid)
    return "not allowed: " + m.invalid;
  if (!m.fits())
    return doesNotFit(m);
  double ratio = m.stepSeconds / winner.stepSeconds - 1;
  if (std::fabs(ratio) < 0.0005)
    return llvm::formatv("as fast ({0} per step), needs {1}",
                         formatSeconds(m.stepSeconds),
                         formatBytes(m.deviceNeedBytes))
        .str();
  return llvm::formatv("{0:f1}% {1} ({2} per step)", std::fabs(ratio) * 100,
                       ratio > 0 ? "slower" : "faster",
                       formatSeconds(m.stepSeconds))
      .str();
}

} // namespace

//===----------------------------------------------------------------------===//
// The search
//===----------------------------------------------------------------------===//

SearchKnobs SearchKnobs::of(const PlanSpec &spec) {
  SearchKnobs k;
  k.sharding = spec.parallel.sharding;
  k.replicate = spec.parallel.meshReplicate;
  k.shard = spec.parallel.meshShard;
  k.offload = spec.parallel.offload;
  k.checkpointing = spec.train.activationCheckpointing;
  k.microBatch = spec.train.microBatch;
  k.gradAccum = spec.train.gradAccum;
  if (spec.train.precision != Precision::FP32)
    k.gradDtype = spec.train.gradDtype;
  k.backwardPrefetch = spec.parallel.backwardPrefetch;
  k.forwardPrefetch = spec.parallel.forwardPrefetch;
  k.maxInflightGathers = spec.parallel.maxInflightGathers;
  k.gradSync = spec.parallel.gradSync;
  return k;
}

std::optional<SearchResult>
plan::searchPlan(llvm::SourceMgr &sourceMgr, unsigned bufferId,
                 llvm::ArrayRef<std::string> overrides, llvm::StringRef name,
                 const SearchOptions &options, DiagEmitter &diag) {
  auto start = std::chrono::steady_clock::now();
  std::optional<PlanSpec> given =
      loadPlan(sourceMgr, bufferId, overrides, name, diag);
  if (!given)
    return std::nullopt;
  // The data-parallel ranks: a plan's tensor groups stay as it gives them.
  int64_t world = given->cluster.worldSize();
  int64_t ranks = given->parallel.dataParallelRanks(world);
  int64_t globalBatch = options.globalBatch
                            ? options.globalBatch
                            : given->train.microBatch * given->train.gradAccum *
                                  given->parallel.meshReplicate *
                                  given->parallel.meshShard;
  if (globalBatch % ranks != 0) {
    int64_t below = globalBatch / ranks * ranks;
    diag.error(given->locOf("train.global_batch"),
               llvm::formatv(
                   "--search: a global batch of {0} sequences "
                   "cannot be split evenly over {1} data-parallel "
                   "ranks; the nearest that can: {2}",
                   globalBatch, ranks,
                   below
                       ? llvm::formatv("{0} or {1}", below, below + ranks).str()
                       : std::to_string(ranks)));
    return std::nullopt;
  }

  SearchResult result;
  result.planName = given->name;
  result.globalBatch = globalBatch;
  result.seqLen = given->train.seqLen;
  result.worldSize = world;
  result.pipeline = given->parallel.pipeline;
  SearchStats &stats = result.stats;
  Evaluator evaluator(sourceMgr, bufferId, overrides, name, given->model.layers,
                      given->parallel.pipeline > 1, globalBatch,
                      options.exhaustive, stats);
  bool exhaustive = options.exhaustive;

  // The plan as given, lowered as planc lowers it.
  SearchKnobs givenKnobs = SearchKnobs::of(*given);
  {
    PlanSpec spec = *given;
    auto needOf = [&](const PlanSpec &layout) -> std::optional<uint64_t> {
      const SearchMetrics &m =
          evaluator.evaluate(SearchKnobs::of(layout), true);
      if (!m.valid)
        return std::nullopt;
      return m.deviceNeedBytes;
    };
    (void)chooseGradDtype(spec,
                          [&](const PlanSpec &fp32, const PlanSpec &working) {
                            return LayoutPeaks{needOf(fp32), needOf(working)};
                          });
    SearchKnobs k = SearchKnobs::of(spec);
    const SearchMetrics &m = evaluator.evaluate(k, /*exact=*/true);
    if (m.valid)
      result.given = SearchCandidate{k, m};
  }

  Space space = spaceOf(*given, globalBatch);
  stats.spaceSize = int64_t(space.shardings.size()) * space.offloads.size() *
                    space.checkpointing.size() * space.batches.size() *
                    space.gradDtypes.size();

  // Make it fit: every structure, offload sets of fewer states first.
  std::vector<SearchKnobs> deviceFailures;
  std::vector<SearchCandidate> fitting;
  std::vector<SearchCandidate> misses;
  llvm::StringSet<> considered;
  auto consider = [&](const SearchKnobs &k, const SearchMetrics &m) {
    if (!m.valid || !considered.insert(keyOf(k)).second)
      return;
    if (m.fits())
      fitting.push_back({k, m});
    else
      misses.push_back({k, m});
    if (!m.deviceFits())
      deviceFailures.push_back(k);
  };
  for (const std::optional<DType> &gradDtype : space.gradDtypes)
    for (Checkpointing checkpointing : space.checkpointing)
      for (auto [micro, accum] : space.batches)
        for (const SearchKnobs &sharding : space.shardings) {
          SearchKnobs k = structureOf(sharding, givenKnobs);
          k.checkpointing = checkpointing;
          k.microBatch = micro;
          k.gradAccum = accum;
          k.gradDtype = gradDtype;
          std::vector<OffloadSpec> fitsWith;
          // The most offloaded valid set first: when it does not fit on
          // the device, nothing of this slice does.
          for (const OffloadSpec &offload : llvm::reverse(space.offloads)) {
            k.offload = offload;
            if (!exhaustive &&
                llvm::any_of(deviceFailures, [&](const SearchKnobs &failed) {
                  return needsAtLeast(k, failed);
                })) {
              ++stats.prunedMemory;
              break;
            }
            const SearchMetrics &m = evaluator.evaluate(k, exhaustive);
            if (m.valid) {
              // One that fits is taken up below, if no smaller set fits.
              if (!m.fits())
                consider(k, m);
              break;
            }
          }
          for (const OffloadSpec &offload : space.offloads) {
            k.offload = offload;
            if (!exhaustive) {
              if (llvm::any_of(fitsWith, [&](const OffloadSpec &fit) {
                    return offloadSubset(fit, offload);
                  })) {
                ++stats.prunedOffload;
                continue;
              }
              if (llvm::any_of(deviceFailures, [&](const SearchKnobs &failed) {
                    return needsAtLeast(k, failed);
                  })) {
                ++stats.prunedMemory;
                continue;
              }
            }
            const SearchMetrics &m = evaluator.evaluate(k, exhaustive);
            consider(k, m);
            if (m.fits())
              fitsWith.push_back(offload);
          }
        }

  // Make it fast: the prefetch and gradient-sync settings of the fastest.
  llvm::stable_sort(fitting, faster);
  size_t refine = exhaustive
                      ? fitting.size()
                      : std::min<size_t>(fitting.size(), options.top + 2);
  std::vector<SearchCandidate> variants;
  for (size_t i = 0; i < refine; ++i) {
    const SearchKnobs &base = fitting[i].knobs;
    std::vector<Prefetch> backward = {base.backwardPrefetch};
    std::vector<bool> forward = {base.forwardPrefetch};
    if (gathersPerUnit(base.sharding)) {
      backward = {Prefetch::Pre, Prefetch::Post, Prefetch::None};
      forward = {false, true};
    } else if (base.sharding == Sharding::ShardGradOp) {
      forward = {false, true};
    }
    std::vector<GradSync> syncs = {base.gradSync};
    if (base.gradAccum > 1)
      syncs = {GradSync::EveryMicroBatch, GradSync::LastMicroBatch};
    for (Prefetch b : backward)
      for (bool f : forward)
        for (GradSync s : syncs) {
          SearchKnobs k = base;
          k.backwardPrefetch = b;
          k.forwardPrefetch = f;
          k.gradSync = s;
          if (k == base)
            continue;
          const SearchMetrics &m = evaluator.evaluate(k, exhaustive);
          if (m.fits())
            variants.push_back({k, m});
        }
    // How many gathers may be in flight, for the fastest of these: more
    // overlap against the memory of more gathered units.
    if (!gathersPerUnit(base.sharding))
      continue;
    SearchCandidate best = fitting[i];
    for (const SearchCandidate &v : variants)
      if (structureOf(v.knobs, givenKnobs) == structureOf(base, givenKnobs) &&
          faster(v, best))
        best = v;
    for (int64_t inflight : kInflightGathers) {
      SearchKnobs k = best.knobs;
      k.maxInflightGathers = inflight;
      if (k == best.knobs)
        continue;
      const SearchMetrics &m = evaluator.evaluate(k, exhaustive);
      if (m.fits())
        variants.push_back({k, m});
    }
  }
  fitting.insert(fitting.end(), variants.begin(), variants.end());
  llvm::stable_sort(fitting, faster);

  // One row per structure, its fastest time-only settings, with the
  // report's own numbers: each lowered whole, and left out when that does
  // not fit after all.
  std::vector<SearchCandidate> rows;
  for (const SearchCandidate &c : fitting) {
    if (rows.size() == options.top)
      break;
    SearchKnobs structure = structureOf(c.knobs, givenKnobs);
    if (llvm::any_of(rows, [&](const SearchCandidate &r) {
          return structureOf(r.knobs, givenKnobs) == structure;
        }))
      continue;
    const SearchMetrics &exact = evaluator.evaluate(c.knobs, /*exact=*/true);
    if (!exact.fits()) {
      ++stats.estimatedToFit;
      misses.push_back({c.knobs, exact});
      continue;
    }
    rows.push_back({c.knobs, exact});
  }
  llvm::stable_sort(rows, faster);
  result.best = rows;

  if (rows.empty()) {
    auto closest = llvm::min_element(
        misses, [](const SearchCandidate &a, const SearchCandidate &b) {
          return shortfall(a.metrics) < shortfall(b.metrics);
        });
    if (closest != misses.end())
      result.closest = SearchCandidate{
          closest->knobs, evaluator.evaluate(closest->knobs, /*exact=*/true)};
  } else {
    // Why: each setting of the winner against its other values, the rest
    // kept, compared by the same numbers the ranking used.
    const SearchKnobs &w = rows.front().knobs;
    const SearchMetrics &wm = evaluator.evaluate(w, false);
    auto reason =
        [&](llvm::StringRef knob, std::string chosen,
            llvm::ArrayRef<std::pair<std::string, SearchKnobs>> others) {
          KnobReason r{knob.str(), std::move(chosen), {}};
          for (const auto &[label, k] : others)
            r.alternatives.push_back(label + ": " +
                                     verdict(evaluator.evaluate(k, false), wm));
          if (!r.alternatives.empty())
            result.why.push_back(std::move(r));
        };
    std::vector<std::pair<std::string, SearchKnobs>> others;
    for (const SearchKnobs &s : space.shardings) {
      if (s.sharding == w.sharding && s.shard == w.shard)
        continue;
      SearchKnobs k = w;
      k.sharding = s.sharding;
      k.replicate = s.replicate;
      k.shard = s.shard;
      others.push_back({s.shardingText(), k});
    }
    reason("sharding", w.shardingText(), others);

    others.clear();
    for (const OffloadSpec &o : space.offloads) {
      if (o == w.offload)
        continue;
      SearchKnobs k = w;
      k.offload = o;
      others.push_back({k.offloadText(), k});
    }
    reason("offload", w.offloadText(), others);

    others.clear();
    for (Checkpointing c : space.checkpointing)
      if (c != w.checkpointing) {
        SearchKnobs k = w;
        k.checkpointing = c;
        others.push_back({stringify(c).str(), k});
      }
    reason("activation_checkpointing", stringify(w.checkpointing).str(),
           others);

    others.clear();
    for (auto [micro, accum] : space.batches)
      if (micro != w.microBatch) {
        SearchKnobs k = w;
        k.microBatch = micro;
        k.gradAccum = accum;
        others.push_back(
            {llvm::formatv("micro_batch {0} x grad_accum {1}", micro, accum)
                 .str(),
             k});
      }
    reason("micro_batch x grad_accum",
           llvm::formatv("micro_batch {0} x grad_accum {1}", w.microBatch,
                         w.gradAccum)
               .str(),
           others);

    if (w.gradDtype) {
      others.clear();
      for (const std::optional<DType> &d : space.gradDtypes)
        if (d != w.gradDtype) {
          SearchKnobs k = w;
          k.gradDtype = d;
          others.push_back({stringify(*d).str(), k});
        }
      reason("grad_dtype", stringify(*w.gradDtype).str(), others);
    }
    if (gathersPerUnit(w.sharding)) {
      others.clear();
      for (Prefetch b : {Prefetch::Pre, Prefetch::Post, Prefetch::None})
        if (b != w.backwardPrefetch) {
          SearchKnobs k = w;
          k.backwardPrefetch = b;
          others.push_back({stringify(b).str(), k});
        }
      reason("backward_prefetch", stringify(w.backwardPrefetch).str(), others);
    }
    if (gathersPerUnit(w.sharding)) {
      others.clear();
      for (int64_t inflight : kInflightGathers)
        if (inflight != w.maxInflightGathers) {
          SearchKnobs k = w;
          k.maxInflightGathers = inflight;
          others.push_back({std::to_string(inflight), k});
        }
      reason("max_inflight_gathers", std::to_string(w.maxInflightGathers),
             others);
    }
    if (gathersPerUnit(w.sharding) || w.sharding == Sharding::ShardGradOp) {
      SearchKnobs k = w;
      k.forwardPrefetch = !w.forwardPrefetch;
      reason("forward_prefetch", w.forwardPrefetch ? "true" : "false",
             {{k.forwardPrefetch ? "true" : "false", k}});
    }
    if (w.gradAccum > 1) {
      SearchKnobs k = w;
      k.gradSync = w.gradSync == GradSync::EveryMicroBatch
                       ? GradSync::LastMicroBatch
                       : GradSync::EveryMicroBatch;
      reason("grad_sync", stringify(w.gradSync).str(),
             {{stringify(k.gradSync).str(), k}});
    }
  }

  for (SearchCandidate &c : result.best)
    c.changes = changedOverrides(*given, c.knobs, globalBatch);
  for (std::optional<SearchCandidate> *c : {&result.given, &result.closest})
    if (*c)
      (*c)->changes = changedOverrides(*given, (*c)->knobs, globalBatch);

  stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return result;
}

//===----------------------------------------------------------------------===//
// The winner as a plan
//===----------------------------------------------------------------------===//

std::vector<std::string> plan::changedOverrides(const PlanSpec &given,
                                                const SearchKnobs &knobs,
                                                int64_t globalBatch) {
  std::vector<std::string> sets;
  const ParallelSpec &p = given.parallel;
  const TrainSpec &t = given.train;
  auto place = [](MemorySpace space) { return stringify(space).str(); };
  if (knobs.sharding != p.sharding)
    sets.push_back("parallel.sharding=" + stringify(knobs.sharding).str());
  // The mesh: written when the plan names one or the sharding's default
  // (docs/language.md, derived defaults) is not the winner's.
  std::pair<int64_t, int64_t> derived = p.defaultMesh(
      knobs.sharding, p.dataParallelRanks(given.cluster.worldSize()),
      given.cluster.gpusPerNode);
  std::pair<int64_t, int64_t> mesh = {knobs.replicate, knobs.shard};
  if ((given.isGiven("parallel.mesh") &&
       mesh != std::pair<int64_t, int64_t>{p.meshReplicate, p.meshShard}) ||
      (!given.isGiven("parallel.mesh") && mesh != derived))
    sets.push_back("parallel.mesh=" + meshText(mesh.first, mesh.second));
  if (knobs.offload.params != p.offload.params)
    sets.push_back("parallel.offload.params=" + place(knobs.offload.params));
  if (knobs.offload.grads != p.offload.grads)
    sets.push_back("parallel.offload.grads=" + place(knobs.offload.grads));
  if (knobs.offload.optimizer != p.offload.optimizer) {
    sets.push_back("parallel.offload.optimizer=" +
                   place(knobs.offload.optimizer));
    if (given.isGiven("parallel.optimizer_step"))
      sets.push_back("parallel.optimizer_step=" +
                     place(knobs.offload.optimizer));
  }
  if (knobs.backwardPrefetch != p.backwardPrefetch)
    sets.push_back("parallel.backward_prefetch=" +
                   stringify(knobs.backwardPrefetch).str());
  if (knobs.forwardPrefetch != p.forwardPrefetch)
    sets.push_back(std::string("parallel.forward_prefetch=") +
                   (knobs.forwardPrefetch ? "true" : "false"));
  if (knobs.maxInflightGathers != p.maxInflightGathers)
    sets.push_back("parallel.max_inflight_gathers=" +
                   std::to_string(knobs.maxInflightGathers));
  if (knobs.gradSync != p.gradSync)
    sets.push_back("parallel.grad_sync=" + stringify(knobs.gradSync).str());
  if (knobs.checkpointing != t.activationCheckpointing)
    sets.push_back("train.activation_checkpointing=" +
                   stringify(knobs.checkpointing).str());
  if (knobs.microBatch != t.microBatch)
    sets.push_back("train.micro_batch=" + std::to_string(knobs.microBatch));
  // grad_accum is derived from global_batch when the plan gives that alone.
  if (knobs.gradAccum != t.gradAccum && (given.isGiven("train.grad_accum") ||
                                         !given.isGiven("train.global_batch")))
    sets.push_back("train.grad_accum=" + std::to_string(knobs.gradAccum));
  // A plan that states its global batch states the searched one.
  if (given.isGiven("train.global_batch") && globalBatch != t.globalBatch)
    sets.push_back("train.global_batch=" + std::to_string(globalBatch));
  if (knobs.gradDtype && knobs.gradDtype != t.gradDtype)
    sets.push_back("train.grad_dtype=" + stringify(*knobs.gradDtype).str());
  else if (knobs.gradDtype && !given.isGiven("train.grad_dtype"))
    // Left open, planc would choose by peak, not by time: say it.
    sets.push_back("train.grad_dtype=" + stringify(*knobs.gradDtype).str());
  return sets;
}

//===----------------------------------------------------------------------===//
// Output
//===----------------------------------------------------------------------===//

static std::string batchText(const SearchKnobs &k) {
  return llvm::formatv("{0} x {1}", k.microBatch, k.gradAccum).str();
}

static std::string prefetchText(const SearchKnobs &k) {
  if (!gathersPerUnit(k.sharding) && k.sharding != Sharding::ShardGradOp)
    return "-";
  std::string text;
  if (gathersPerUnit(k.sharding))
    text = stringify(k.backwardPrefetch).str();
  if (k.forwardPrefetch)
    text += text.empty() ? "fwd" : "+fwd";
  if (gathersPerUnit(k.sharding))
    text += "/" + std::to_string(k.maxInflightGathers);
  return text.empty() ? "-" : text;
}

void plan::printSearchTable(const SearchResult &r, llvm::raw_ostream &os) {
  const SearchStats &s = r.stats;
  os << llvm::formatv(
      "{0}: searched {1} candidates for a global batch of {2} x {3} tokens "
      "on {4} rank(s){5} in {6}\n",
      r.planName, s.spaceSize, r.globalBatch, r.seqLen, r.worldSize,
      r.pipeline > 1
          ? llvm::formatv(" of {0} pipeline stages (each candidate lowered "
                          "whole)",
                          r.pipeline)
                .str()
          : std::string(),
      formatSeconds(s.seconds));
  os << llvm::formatv(
      "  analyzed {0} ({1} extended from shorter plans, {2} rejected by the "
      "plan's checks), {3} lowerings; not lowered: {4} need more memory "
      "than one that did not fit, {5} offload more than one that fits{6}\n",
      s.evaluated, s.extrapolated, s.invalid, s.lowerings, s.prunedMemory,
      s.prunedOffload,
      s.estimatedToFit
          ? llvm::formatv("; {0} extrapolated to fit but did not when "
                          "lowered whole",
                          s.estimatedToFit)
                .str()
          : std::string());
  if (s.check.candidates)
    os << llvm::formatv(
        "  extensions checked: {0} candidates extended from shorter plans "
        "and lowered whole: step within {1:e2}, device need within {2:e2} "
        "(relative); the need's lower bound {3}\n",
        s.check.candidates, s.check.maxStepError, s.check.maxNeedError,
        s.check.boundFailures
            ? llvm::formatv("failed for {0}", s.check.boundFailures).str()
            : std::string("held for all"));

  auto row = [&](llvm::StringRef label, const SearchCandidate &c) {
    const SearchMetrics &m = c.metrics;
    os << llvm::formatv(
        "{0,-6}{1,-22}{2,-24}{3,-6}{4,-9}{5,-6}{6,-11}{7,12}{8,12}{9,12}"
        "{10,8}{11,12}\n",
        label, c.knobs.shardingText(), c.knobs.offloadText(),
        stringify(c.knobs.checkpointing), batchText(c.knobs),
        c.knobs.gradDtype ? stringify(*c.knobs.gradDtype) : "-",
        prefetchText(c.knobs), formatBytes(m.deviceNeedBytes),
        formatSeconds(m.stepSeconds),
        llvm::formatv("{0:f0}", m.tokensPerSecond).str(),
        llvm::formatv("{0:f1}%", m.mfu * 100).str(),
        formatSeconds(m.exposedCommSeconds));
  };
  os << "\n";
  os << llvm::formatv(
      "{0,-6}{1,-22}{2,-24}{3,-6}{4,-9}{5,-6}{6,-11}{7,12}{8,12}{9,12}{10,8}"
      "{11,12}\n",
      "rank", "sharding", "offload", "ckpt", "mb x ga", "grads", "prefetch",
      "memory", "step", "tokens/s", "MFU", "exposed");
  for (auto [i, c] : llvm::enumerate(r.best))
    row(std::to_string(i + 1), c);
  if (r.given) {
    if (r.given->metrics.valid)
      row("given", *r.given);
  }
  if (!r.best.empty()) {
    uint64_t capacity = r.best.front().metrics.deviceCapacityBytes;
    os << llvm::formatv("memory: what a rank needs on its device (arena + "
                        "workspace + reserve{0}), of {1}\n",
                        r.pipeline > 1 ? "; the stage that needs the most" : "",
                        formatBytes(capacity));
    if (r.given && r.given->metrics.valid) {
      const SearchMetrics &g = r.given->metrics, &b = r.best.front().metrics;
      if (!g.fits())
        os << "the plan as given " << doesNotFit(g) << "\n";
      else
        os << llvm::formatv("the first is {0:f2}x the plan as given\n",
                            g.stepSeconds / b.stepSeconds);
    }
    os << "\nWhy the first:\n";
    for (const KnobReason &reason : r.why) {
      os << "  " << reason.knob << " = " << reason.chosen << "\n";
      for (const std::string &alternative : reason.alternatives)
        os << "    " << alternative << "\n";
    }
    return;
  }
  os << "\nNothing fits.";
  if (r.closest) {
    const SearchMetrics &m = r.closest->metrics;
    bool device = !m.deviceFits();
    uint64_t need = device ? m.deviceNeedBytes : m.hostBytesPerNode;
    uint64_t have = device ? m.deviceCapacityBytes : m.hostCapacityBytes;
    os << llvm::formatv(" The closest candidate needs {0} of {1} {2} "
                        "({3} short):\n",
                        formatBytes(need), formatBytes(have),
                        device ? "device memory per rank"
                               : "host memory per node",
                        formatBytes(need - have));
    row("near", *r.closest);
    os << "What is left to try: "
       << (device ? "devices with more memory, more of them (full_shard "
                    "divides the model's state by\ntheir number), a shorter "
                    "seq_len"
                  : "more host memory per node, more nodes (each keeps a "
                    "smaller share of the offloaded state)")
       << "; or a higher parallel.tensor or a pipeline (parallel.pipeline), "
          "which --search\ndoes not choose: compare them with planc "
          "--report.\n";
    return;
  }
  os << "\n";
}

static llvm::json::Object candidateJson(const SearchCandidate &c) {
  const SearchKnobs &k = c.knobs;
  const SearchMetrics &m = c.metrics;
  llvm::json::Object o;
  o["sharding"] = stringify(k.sharding);
  o["mesh"] = llvm::json::Array{k.replicate, k.shard};
  o["offload"] =
      llvm::json::Object{{"params", stringify(k.offload.params)},
                         {"grads", stringify(k.offload.grads)},
                         {"optimizer", stringify(k.offload.optimizer)}};
  o["activation_checkpointing"] = stringify(k.checkpointing);
  o["micro_batch"] = k.microBatch;
  o["grad_accum"] = k.gradAccum;
  if (k.gradDtype)
    o["grad_dtype"] = stringify(*k.gradDtype);
  o["backward_prefetch"] = stringify(k.backwardPrefetch);
  o["forward_prefetch"] = k.forwardPrefetch;
  o["max_inflight_gathers"] = k.maxInflightGathers;
  o["grad_sync"] = stringify(k.gradSync);
  o["set"] = llvm::json::Array(c.changes);
  if (!m.valid) {
    o["invalid"] = m.invalid;
    return o;
  }
  o["fits"] = m.fits();
  o["device_need_bytes"] = static_cast<int64_t>(m.deviceNeedBytes);
  o["device_capacity_bytes"] = static_cast<int64_t>(m.deviceCapacityBytes);
  o["host_bytes_per_node"] = static_cast<int64_t>(m.hostBytesPerNode);
  o["host_capacity_bytes"] = static_cast<int64_t>(m.hostCapacityBytes);
  o["step_seconds"] = m.stepSeconds;
  o["tokens_per_second"] = m.tokensPerSecond;
  o["mfu"] = m.mfu;
  o["exposed_comm_seconds"] = m.exposedCommSeconds;
  o["exposed_copy_seconds"] = m.exposedCopySeconds;
  return o;
}

llvm::json::Value plan::searchToJson(const SearchResult &r) {
  llvm::json::Array best;
  for (const SearchCandidate &c : r.best)
    best.push_back(candidateJson(c));
  llvm::json::Array why;
  for (const KnobReason &reason : r.why)
    why.push_back(llvm::json::Object{
        {"knob", reason.knob},
        {"chosen", reason.chosen},
        {"alternatives", llvm::json::Array(reason.alternatives)}});
  const SearchStats &s = r.stats;
  llvm::json::Object o{
      {"plan", r.planName},
      {"global_batch", r.globalBatch},
      {"seq_len", r.seqLen},
      {"world_size", r.worldSize},
      {"fits", !r.best.empty()},
      {"best", std::move(best)},
      {"why", std::move(why)},
      {"stats", llvm::json::Object{{"space", s.spaceSize},
                                   {"evaluated", s.evaluated},
                                   {"extrapolated", s.extrapolated},
                                   {"invalid", s.invalid},
                                   {"lowerings", s.lowerings},
                                   {"pruned_memory", s.prunedMemory},
                                   {"pruned_offload", s.prunedOffload},
                                   {"estimated_to_fit", s.estimatedToFit},
                                   {"seconds", s.seconds}}}};
  if (s.check.candidates)
    o["extension_check"] =
        llvm::json::Object{{"candidates", s.check.candidates},
                           {"max_step_error", s.check.maxStepError},
                           {"max_need_error", s.check.maxNeedError},
                           {"bound_failures", s.check.boundFailures}};
  if (r.given)
    o["given"] = candidateJson(*r.given);
  if (r.closest)
    o["closest"] = candidateJson(*r.closest);
  return o;
}
