//===- Verify.cpp - plan-run --verify: the plan against one rank ----------===//
//
// docs/verify.md says what it proves. The shrunk model keeps what the
// lowering depends on: the family, the ratio of query to key/value heads,
// tied embeddings, RoPE settings, BERT's head; it gets 2 layers (or 1),
// head dimension 8 and 2 key/value heads (or fewer), the intermediate size
// in the plan's ratio to hidden, a 256-token vocabulary. The mesh keeps its
// shape with each axis at most 2 (a tensor axis too, with sequence
// parallelism as the plan has it). The plan's optimizer, clipping, precision,
// accumulation, offload and checkpointing stay; the learning rate is held
// constant so that each of the few steps moves the weights. The reference is
// that shrunk plan with no_shard on one rank, no tensor parallelism, nothing
// offloaded, no checkpointing, and the same sequences per step.
//
//===----------------------------------------------------------------------===//

#include "Verify.h"

#include "Files.h"
#include "Json.h"
#include "Launch.h"
#include "Rank.h"
#include "ScheduleFile.h"
#include "ScheduleInput.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

namespace plan::run {
namespace {

namespace rt = plan::rt;

/// fp32: the same kernels in another summation order (micro-batch and rank
/// splits), far above fp32 roundoff over a few steps. Mixed precision: each
/// sequence's bf16/fp16 math is the same, the fp32 reductions' order and
/// where gradients round to the working type between micro-batches differ;
/// test/equivalence measured at most 2.3e-5 over its cases, and a real fault
/// (a skipped or doubled step, unaveraged gradients) is 1e-3 or more.
constexpr double kFp32Tolerance = 1e-5;
constexpr double kMixedTolerance = 2e-4;
/// Mixed precision with gradients kept in the working type (`grad_dtype`
/// bf16/fp16): each micro-batch's gradient is added into storage of that
/// type, and a rank that accumulates 4 micro-batches rounds at other points
/// than the reference accumulating all of them, each addition by up to the
/// type's unit roundoff (bf16 2^-8, 3.9e-3; fp16 2^-11). Spread over many
/// elements that averages out (2.8e-4 on the RTX 4090 offload example's
/// norm); where a few elements carry the norm (a BERT classifier's) the
/// norms differ by a whole roundoff (3.9e-3 in bf16, against 6e-8 with fp32
/// gradients). The tolerance is two unit roundoffs, at least 2e-3; an
/// unaveraged reduction is 1, a doubled micro-batch 1e-1.
double workingTypeGradTolerance(rt::Precision precision) {
  double roundoff = precision == rt::Precision::BF16Mixed ? 0x1p-8 : 0x1p-11;
  return std::max(2e-3, 2 * roundoff);
}

struct Step {
  double loss = 0; // NaN where it was not finite (JSON null)
  bool normRecorded = false;
  std::optional<double> gradNorm; // none where not finite (JSON null)
  bool skipped = false;           // fp16's loss scaler found inf/NaN gradients
};

/// A number of a metrics line, NaN where plan-run wrote null (not finite).
double numberOrNaN(const plan::rt::support::Json &value) {
  return value.is_null() ? NAN : value.get<double>();
}

/// The per-step lines plan-run's --metrics wrote (docs/launching.md).
std::vector<Step> readMetrics(const std::string &path) {
  std::vector<Step> steps;
  std::string text = plan::rt::support::readFile(path);
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = std::min(text.find('\n', begin), text.size());
    std::string_view line(text.data() + begin, end - begin);
    begin = end + 1;
    if (line.empty())
      continue;
    plan::rt::support::Json j = plan::rt::support::parseJson(line, path);
    Step s;
    s.loss = numberOrNaN(j.at("loss"));
    if (j.contains("grad_norm")) {
      s.normRecorded = true;
      if (!j["grad_norm"].is_null())
        s.gradNorm = j["grad_norm"].get<double>();
    }
    s.skipped = j.value("skipped", false);
    steps.push_back(s);
  }
  return steps;
}

/// A tolerance as the check uses it: 1e-05, 2e-04, 7.8e-03 (bf16's two
/// unit roundoffs, which %.0e would print as 8e-03).
std::string formatTolerance(double tolerance) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1e", tolerance);
  std::string s = text;
  if (size_t zero = s.find(".0e"); zero != std::string::npos)
    s.erase(zero, 2);
  return s;
}

double relDiff(double a, double b) {
  double scale = std::max(std::fabs(b), 1e-30);
  return std::fabs(a - b) / scale;
}

} // namespace

int verifyPlan(const RunOptions &options, const std::string &executable) {
  if (!isPlanFile(options.file)) {
    std::fprintf(stderr,
                 "plan-run: --verify: %s is not a .plan: the check "
                 "compiles shrunk copies of the plan itself\n",
                 options.file.c_str());
    return 1;
  }
  // The plan as written, for the sizes and the mesh to shrink.
  rt::ValidSchedule original = [&] {
    // Its sizes are read even when it does not fit its own cluster.
    std::vector<std::string> flags = options.verifyPlancFlags;
    flags.push_back("--allow-oversubscribe");
    ScheduleInput input(options.file, executable, options.sets, flags);
    return rt::readScheduleFile(input.path());
  }();
  const rt::Schedule &s = original;
  const rt::ModelConfig &m = s.model;

  int64_t group =
      std::max<int64_t>(1, m.heads / std::max<int64_t>(1, m.kvHeads));
  int64_t kvHeads = std::min<int64_t>(m.kvHeads, 2);
  int64_t heads = kvHeads * group;
  int64_t hidden = heads * 8;
  int64_t intermediate =
      std::max<int64_t>(1, std::llround(static_cast<double>(hidden) *
                                        static_cast<double>(m.intermediate) /
                                        static_cast<double>(m.hidden)));
  // A pipeline of 2 stages with up to 2 model chunks each: 4 blocks.
  int64_t pipeline = std::min<int64_t>(s.pipeline, 2);
  int64_t layers = std::min<int64_t>(m.layers, pipeline > 1 ? 4 : 2);
  int64_t seqLen = std::min<int64_t>(s.train.seqLen, 32);
  int64_t microBatch = std::min<int64_t>(s.train.microBatch, 2);
  int64_t accum = std::min<int64_t>(s.microBatches, 4);
  // 1F1B needs a micro-batch per stage, interleaving a multiple of them.
  if (pipeline > 1)
    accum = std::max<int64_t>(pipeline, accum / pipeline * pipeline);
  int64_t replicate = std::min<int64_t>(s.replicate, 2);
  int64_t shard = std::min<int64_t>(s.shard, 2);
  // A tensor axis of 2 divides the shrunk heads (kv_heads 2, or heads a
  // multiple of 2 without GQA) and the sequence (32 tokens or fewer, even).
  int64_t tensor = std::min<int64_t>(s.tensor, 2);
  // Data-parallel ranks (what splits the batch), and every rank.
  int64_t dataParallel = replicate * shard;
  int64_t world = dataParallel * tensor * pipeline;
  // The MLP's features split evenly too.
  intermediate = (intermediate + tensor - 1) / tensor * tensor;

  std::vector<std::string> shrunk = options.sets;
  // Mixed precision: both runs keep gradients as the plan does (planc picks
  // the layout of lower peak, which differs between the two otherwise).
  bool mixed = s.train.precision != rt::Precision::FP32;
  // What any stage's program holds.
  auto anyBuffer = [&](auto predicate) {
    return std::any_of(
        s.programs.begin(), s.programs.end(), [&](const rt::Program &p) {
          return std::any_of(p.buffers.begin(), p.buffers.end(), predicate);
        });
  };
  bool workingTypeGrads = mixed && anyBuffer([](const rt::Buffer &b) {
                            return b.kind == rt::Buffer::Kind::Alloc &&
                                   (b.role == rt::BufferRole::Grad ||
                                    b.role == rt::BufferRole::UnshardedGrad) &&
                                   b.type != rt::ElementType::F32;
                          });
  if (mixed)
    shrunk.push_back(std::string("train.grad_dtype=") +
                     (!workingTypeGrads ? "fp32"
                      : s.train.precision == rt::Precision::BF16Mixed
                          ? "bf16"
                          : "fp16"));
  // A plan that does not clip computes no gradient norm; a bound no norm
  // reaches makes both runs compute it (its coefficient is exactly 1).
  if (s.train.gradClip <= 0)
    shrunk.push_back("train.grad_clip=1e9");
  for (std::string set :
       {"model.hidden=" + std::to_string(hidden),
        "model.heads=" + std::to_string(heads),
        "model.intermediate=" + std::to_string(intermediate),
        "model.layers=" + std::to_string(layers),
        std::string("model.vocab=256"),
        "train.seq_len=" + std::to_string(seqLen),
        "train.micro_batch=" + std::to_string(microBatch),
        std::string("train.lr_schedule=constant"),
        std::string("cluster.gpu=cpu"), std::string("cluster.nodes=1")})
    shrunk.push_back(set);
  if (m.family == rt::ModelFamily::Llama) // GPT-2 and BERT have no GQA
    shrunk.push_back("model.kv_heads=" + std::to_string(kvHeads));
  std::vector<std::string> planSets = shrunk;
  // The global batch too: a plan that states it would otherwise disagree.
  const std::string globalBatch =
      "train.global_batch=" + std::to_string(microBatch * accum * dataParallel);
  planSets.push_back("train.grad_accum=" + std::to_string(accum));
  planSets.push_back(globalBatch);
  planSets.push_back("cluster.gpus_per_node=" + std::to_string(world));
  if (tensor > 1)
    planSets.push_back("parallel.tensor=" + std::to_string(tensor));
  if (pipeline > 1) {
    planSets.push_back("parallel.pipeline=" + std::to_string(pipeline));
    planSets.push_back("parallel.stages=balanced");
  }
  if (s.sharding == rt::Sharding::HybridShard)
    planSets.push_back("parallel.mesh=(" + std::to_string(replicate) + ", " +
                       std::to_string(shard) + ")");
  std::vector<std::string> referenceSets = shrunk;
  for (std::string set :
       {"train.grad_accum=" + std::to_string(accum * dataParallel), globalBatch,
        std::string("cluster.gpus_per_node=1"),
        std::string("parallel.tensor=1"), std::string("parallel.pipeline=1"),
        std::string("parallel.sequence_parallel=false"),
        std::string("parallel.sharding=no_shard"),
        std::string("parallel.offload.params=device"),
        std::string("parallel.offload.grads=device"),
        std::string("parallel.offload.optimizer=device"),
        std::string("train.activation_checkpointing=none")})
    referenceSets.push_back(set);

  bool offloaded = anyBuffer([](const rt::Buffer &b) {
    return b.kind == rt::Buffer::Kind::Alloc && b.space != rt::Space::Device;
  });
  double tolerance = !mixed ? kFp32Tolerance
                     : workingTypeGrads
                         ? workingTypeGradTolerance(s.train.precision)
                         : kMixedTolerance;
  int64_t steps = options.steps > 0 ? options.steps : 5;
  std::printf(
      "plan-run: --verify %s: %s with %lld layers, hidden %lld, %lld heads "
      "(%lld key/value), intermediate %lld, vocab 256; %lld x %lld tokens "
      "per micro-batch\n",
      options.file.c_str(), rt::toString(m.family),
      static_cast<long long>(layers), static_cast<long long>(hidden),
      static_cast<long long>(heads), static_cast<long long>(kvHeads),
      static_cast<long long>(intermediate), static_cast<long long>(microBatch),
      static_cast<long long>(seqLen));
  // "(R, S)", with a tensor axis "(R, S) x tensor T[ + SP]", with a
  // pipeline "... x pipeline P".
  auto mesh = [](int64_t r, int64_t sh, int64_t t, bool sp, int64_t p) {
    // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on
    // "(" + std::to_string(...).
    std::string text = "(";
    text += std::to_string(r);
    text += ", ";
    text += std::to_string(sh);
    text += ")";
    if (t > 1) {
      text += " x tensor ";
      text += std::to_string(t);
      if (sp)
        text += " + SP";
    }
    if (p > 1) {
      text += " x pipeline ";
      text += std::to_string(p);
    }
    return text;
  };
  std::printf(
      "  the plan:      %s on mesh %s = %lld local CPU "
      "rank%s, %s%s, grad_accum %lld%s (the plan's: mesh %s, "
      "grad_accum %lld)\n",
      rt::toString(s.sharding),
      mesh(replicate, shard, tensor, s.sequenceParallel, pipeline).c_str(),
      static_cast<long long>(world), world == 1 ? "" : "s",
      rt::toString(s.train.precision),
      !mixed             ? ""
      : workingTypeGrads ? " with working-type gradients"
                         : " with fp32 gradients",
      static_cast<long long>(accum), offloaded ? ", offloaded as planned" : "",
      mesh(s.replicate, s.shard, s.tensor, s.sequenceParallel, s.pipeline)
          .c_str(),
      static_cast<long long>(s.microBatches));
  std::printf("  the reference: no_shard on 1 rank, %s, grad_accum %lld, "
              "nothing offloaded, no checkpointing: the same %lld sequences "
              "a step\n",
              rt::toString(s.train.precision),
              static_cast<long long>(accum * dataParallel),
              static_cast<long long>(accum * dataParallel * microBatch));
  std::fflush(stdout);

  TemporaryDirectory work; // the runs' metrics
  auto train = [&](const std::vector<std::string> &sets, int64_t nproc,
                   const std::string &metrics) {
    // The shrunk plan and the reference are plan-run's: planc's warnings
    // about them (a schedule kept with pipeline = 1, a shrunk pipeline's
    // bubble) are not about what the user wrote, and show only when planc
    // fails.
    ScheduleInput input(options.file, executable, sets,
                        options.verifyPlancFlags,
                        ScheduleInput::Diagnostics::OnlyIfItFails);
    RunOptions run;
    run.file = input.path();
    run.steps = steps;
    run.metrics = metrics;
    run.quiet = true;
    run.threads = options.threads > 0 ? options.threads : 1;
    run.timeoutSeconds = options.timeoutSeconds;
    run.seed = options.seed;
    LocalRanks ranks;
    ranks.executable = executable;
    ranks.arguments = rankArguments(run, input.path());
    ranks.nproc = static_cast<int>(nproc);
    auto store = serveLocalStore(ranks);
    return runLocalRanks(ranks);
  };
  std::string planMetrics = work.file("plan.jsonl");
  std::string refMetrics = work.file("reference.jsonl");
  if (int rc = train(planSets, world, planMetrics); rc != 0) {
    std::fprintf(stderr,
                 "plan-run: --verify: the shrunk plan did not run "
                 "(exit %d)\n",
                 rc);
    return 1;
  }
  if (int rc = train(referenceSets, 1, refMetrics); rc != 0) {
    std::fprintf(stderr,
                 "plan-run: --verify: the reference did not run "
                 "(exit %d)\n",
                 rc);
    return 1;
  }
  std::vector<Step> ours = readMetrics(planMetrics);
  std::vector<Step> ref = readMetrics(refMetrics);
  if (ours.size() != static_cast<size_t>(steps) || ref.size() != ours.size()) {
    std::fprintf(stderr,
                 "plan-run: --verify: %zu and %zu steps were "
                 "recorded, not %lld\n",
                 ours.size(), ref.size(), static_cast<long long>(steps));
    return 1;
  }

  std::printf("  step  loss (plan)   loss (reference)  rel diff   "
              "grad norm (plan)  grad norm (reference)  rel diff\n");
  double worst = 0;
  // The first step and quantity beyond the tolerance, if any.
  int64_t failStep = 0;
  const char *failWhat = "loss";
  double failDiff = 0;
  // A step fp16's loss scaler skipped in one run and not in the other.
  int64_t skipStep = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    double dl = relDiff(ours[i].loss, ref[i].loss);
    // Both norms not finite (a step both runs skipped) agree; one finite
    // and one not do not (NaN).
    double dg = 0;
    if (ours[i].gradNorm && ref[i].gradNorm)
      dg = relDiff(*ours[i].gradNorm, *ref[i].gradNorm);
    else if (ours[i].normRecorded && ref[i].normRecorded &&
             ours[i].gradNorm.has_value() != ref[i].gradNorm.has_value())
      dg = NAN;
    if (skipStep == 0 && ours[i].skipped != ref[i].skipped)
      skipStep = static_cast<int64_t>(i) + 1;
    // A norm not finite shows as inf, one not recorded as nan.
    auto shown = [](const Step &step) {
      return step.gradNorm       ? *step.gradNorm
             : step.normRecorded ? INFINITY
                                 : NAN;
    };
    std::printf("  %4zu  %12.6f  %16.6f  %8.1e   %16.6f  %21.6f  %8.1e%s\n",
                i + 1, ours[i].loss, ref[i].loss, dl, shown(ours[i]),
                shown(ref[i]), dg,
                ours[i].skipped && ref[i].skipped ? "  (both skipped)" : "");
    for (auto [d, what] : {std::pair{dl, "loss"}, std::pair{dg, "grad norm"}}) {
      // NaN counts as beyond any tolerance.
      worst = std::isnan(d) || std::isnan(worst) ? NAN : std::max(worst, d);
      if (failStep == 0 && !(d <= tolerance)) {
        failStep = static_cast<int64_t>(i) + 1;
        failWhat = what;
        failDiff = d;
      }
    }
  }
  const char *why =
      !mixed ? "fp32: the same kernels, reduced in another order"
      : workingTypeGrads
          ? "mixed precision with gradients accumulated in the working "
            "type, rounded at other points; see docs/verify.md"
          : "mixed precision: the fp32 reductions in another order; see "
            "docs/verify.md";
  if (skipStep != 0 && (failStep == 0 || skipStep <= failStep)) {
    bool oursSkipped = ours[skipStep - 1].skipped;
    std::printf("verdict: NOT equivalent: at step %lld %s skipped the step "
                "(its gradients were not finite under the loss scale) and "
                "%s did not\n",
                static_cast<long long>(skipStep),
                oursSkipped ? "the plan" : "the reference",
                oursSkipped ? "the reference" : "the plan");
    return 1;
  }
  if (failStep == 0) {
    std::printf("verdict: equivalent: the largest relative difference is "
                "%.1e, within %s (%s) over %lld steps\n",
                worst, formatTolerance(tolerance).c_str(), why,
                static_cast<long long>(steps));
    return 0;
  }
  std::printf("verdict: NOT equivalent: from step %lld the %s differs by "
              "%.1e, more than %s (%s)\n",
              static_cast<long long>(failStep), failWhat, failDiff,
              formatTolerance(tolerance).c_str(), why);
  return 1;
}

} // namespace plan::run
