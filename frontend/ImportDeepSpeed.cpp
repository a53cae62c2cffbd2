//===- ImportDeepSpeed.cpp - planc import deepspeed -----------------------===//
//
// The keys of a DeepSpeed config (ds_config.json, DeepSpeed 0.14-0.16): the
// batch, ZeRO and its offloads, fp16 / bf16 with loss scaling, clipping, the
// optimizer and the scheduler. "auto" (what the HF Trainer fills in) takes,
// in this order: the planc import option for the key, the Accelerate
// config's value when the DeepSpeed config comes through one, the HF
// Trainer's default. docs/importing.md has the table.
//
//===----------------------------------------------------------------------===//

#include "frontend/ImportedPlan.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace plan;
using namespace plan::import;
using llvm::formatv;
using llvm::StringRef;

namespace {

bool isAuto(const ConfigNode &value) {
  return value.kind == ConfigNode::Kind::String && value.text == "auto";
}

std::string noEffect(StringRef why) { return ("no effect: " + why).str(); }

/// DeepSpeed's `{"type": ..., "params": {...}}` sections (optimizer,
/// scheduler).
struct TypedSection {
  const ConfigNode *typeNode = nullptr;
  std::string type;
  const ConfigNode *params = nullptr;
  const ConfigNode *param(StringRef key) const {
    return params && params->isMap() ? params->find(key) : nullptr;
  }
};

class DeepSpeedReader {
public:
  explicit DeepSpeedReader(ImportContext &context)
      : context(context), plan(context.plan), diag(context.diag),
        options(context.options) {}

  void read(const ConfigNode &root);

private:
  void readBatch(const ConfigNode &root);
  void readPrecision(const ConfigMember &member, StringRef precision);
  void readZero(const ConfigMember &zero);
  /// Reads `type` and `params`; any other key is a warning. Nothing when
  /// the section is not a map.
  std::optional<TypedSection> readTypedSection(const ConfigMember &section);
  void readOptimizer(const ConfigMember &optimizer);
  void readScheduler(const ConfigMember &scheduler);

  /// A count (at least 1), or nothing for "auto" (and after reporting a bad
  /// value at it).
  std::optional<int64_t> count(const ConfigMember &m) {
    if (isAuto(m.value))
      return std::nullopt;
    return context.count(m);
  }
  std::optional<double> number(const ConfigNode &value, StringRef key) {
    if (isAuto(value))
      return std::nullopt;
    return readConfigNumber(value, key, diag);
  }

  ImportContext &context;
  PlanWriter &plan;
  DiagEmitter &diag;
  const ImportOptions &options;
  /// Writes train.optimizer once the optimizer and the scheduler are read:
  /// DeepSpeed's WarmupLR and WarmupDecayLR set the peak rate themselves.
  void writeOptimizer();

  std::string optimizerName; // adamw or sgd once read
  std::vector<std::string> optimizerArguments, optimizerFrom; // but lr
  std::optional<double> lr; // the optimizer's, as the config gives it
  std::string lrFrom;
  std::optional<double> warmupMaxLr; // the scheduler's peak rate
  std::string warmupMaxLrFrom;
  llvm::SMLoc warmupMaxLrLoc;
  bool precisionSet = false;
  /// tensor_parallel.autotp_size, read before the batch sizes: the ranks of
  /// a tensor group share their micro-batches.
  int64_t tensor = 1;
};

void DeepSpeedReader::read(const ConfigNode &root) {
  // AutoTP's degree first (reported at its key below): the batch sizes
  // count data-parallel ranks.
  if (const ConfigNode *tp = root.find("tensor_parallel"))
    if (const ConfigNode *size =
            tp->isMap() ? tp->find("autotp_size") : nullptr)
      if (size->integer && *size->integer >= 1 && *size->integer <= kMaxCount)
        tensor = *size->integer;
  readBatch(root);
  auto none = [&](StringRef why) { return context.noEffectBecause(why.str()); };
  auto batch = [](const ConfigMember &) {}; // readBatch took them
  KeyHandler handlers[] = {
      {"train_batch_size", batch},
      {"train_micro_batch_size_per_gpu", batch},
      {"gradient_accumulation_steps", batch},
      {"gradient_clipping",
       [&](const ConfigMember &m) {
         std::optional<double> clip = number(m.value, m.key);
         std::string from = context.shown(m);
         if (isAuto(m.value)) {
           clip = context.accelerateGradClip;
           from = clip ? "auto: the Accelerate config's gradient_clipping"
                       : "auto: the HF Trainer's max_grad_norm";
           if (!clip)
             clip = 1.0;
         }
         if (!clip)
           return;
         if (*clip > 0)
           plan.set("train.grad_clip", planNumber(*clip), from);
         else
           context.noEffect(m, "no clipping (the plan's default)");
       }},
      {"fp16", [&](const ConfigMember &m) { readPrecision(m, "fp16_mixed"); }},
      {"bf16", [&](const ConfigMember &m) { readPrecision(m, "bf16_mixed"); }},
      {"bfloat16",
       [&](const ConfigMember &m) { readPrecision(m, "bf16_mixed"); }},
      {"zero_optimization", [&](const ConfigMember &m) { readZero(m); }},
      {"tensor_parallel",
       [&](const ConfigMember &m) {
         if (!m.value.isMap()) {
           context.badValue(m, "a map with \"autotp_size\"");
           return;
         }
         KeyHandler tp[] = {
             {"autotp_size",
              [&](const ConfigMember &k) {
                std::optional<int64_t> n = count(k);
                if (n && *n == 1)
                  context.noEffect(k, "no effect: no tensor parallelism "
                                      "(tensor = 1, the plan's default)");
                else if (n)
                  plan.set("parallel.tensor", std::to_string(*n),
                           context.shown(k));
              }},
             {"partition_config",
              [&](const ConfigMember &k) {
                context.unsupported(
                    k, "custom layer specs are not read: tensor = N divides "
                       "Llama and GPT-2 layers in Megatron's layout "
                       "(docs/language.md, tensor parallelism)");
              }},
             {"tp_overlap_comm",
              none("the schedule orders the activation collectives")},
             {"preset_model", none("the model is the plan's model")},
         };
         context.visit(m.value, "tensor_parallel", tp);
       }},
      {"optimizer", [&](const ConfigMember &m) { readOptimizer(m); }},
      {"scheduler", [&](const ConfigMember &m) { readScheduler(m); }},
      {"communication_data_type",
       [&](const ConfigMember &m) {
         StringRef type = llvm::StringSwitch<StringRef>(m.value.text)
                              .Cases({"fp32", "float32"}, "fp32")
                              .Cases({"fp16", "float16"}, "fp16")
                              .Cases({"bf16", "bfloat16"}, "bf16")
                              .Default("");
         if (type.empty())
           context.badValue(m, "fp32, fp16 or bf16");
         else
           plan.set("train.reduce_dtype", type.str(), context.shown(m));
       }},
      {"data_types",
       [&](const ConfigMember &m) {
         const ConfigNode *accum =
             m.value.isMap() ? m.value.find("grad_accum_dtype") : nullptr;
         if (m.value.isMap()) {
           PrefixScope scope(context, "data_types.");
           context.visit(m.value, "data_types",
                         {{"grad_accum_dtype", [](const ConfigMember &) {}}});
         }
         if (!accum || accum->isNull()) {
           context.noEffect(m, "no effect: gradients kept in the layout of "
                               "lower peak (train.grad_dtype's default)");
           return;
         }
         StringRef type = llvm::StringSwitch<StringRef>(accum->text)
                              .Case("fp32", "fp32")
                              .Case("fp16", "fp16")
                              .Case("bf16", "bf16")
                              .Default("");
         if (type.empty())
           diag.error(accum->loc, "'grad_accum_dtype' is " + accum->describe() +
                                      "; expected fp32, fp16 or bf16");
         else
           plan.set("train.grad_dtype", type.str(),
                    "data_types.grad_accum_dtype: " + accum->text);
       }},
      {"prescale_gradients",
       none("gradients are averaged once, in the reduction's dtype")},
      {"gradient_predivide_factor",
       none("gradients are averaged once, in the reduction's dtype")},
      {"steps_per_print", none("plan-run prints every step's loss")},
      {"wall_clock_breakdown",
       none("planc --report and --trace give the step's breakdown")},
      {"memory_breakdown", none("planc --report gives the memory plan")},
      {"dump_state", none("a DeepSpeed debugging aid")},
      {"zero_allow_untested_optimizer",
       none("the plan's optimizers are all ZeRO's")},
      {"zero_force_ds_cpu_optimizer",
       none("an offloaded step always runs the runtime's CPU AdamW")},
      {"activation_checkpointing",
       [&](const ConfigMember &m) {
         context.checkKeys(m.value, "activation_checkpointing",
                           {"partition_activations", "cpu_checkpointing",
                            "contiguous_memory_optimization",
                            "number_checkpoints",
                            "synchronize_checkpoint_boundary", "profile"});
         context.noEffect(m, "configures deepspeed.checkpointing, which a "
                             "script calls; set "
                             "train.activation_checkpointing = full for the "
                             "plan's");
       }},
      {"flops_profiler", none("a profiler; planc --report predicts MFU")},
      {"tensorboard", none("a monitor; plan-run --metrics writes JSON lines")},
      {"wandb", none("a monitor; plan-run --metrics writes JSON lines")},
      {"csv_monitor", none("a monitor; plan-run --metrics writes JSON lines")},
      {"comms_logger", none("a monitor; planc --report lists every "
                            "collective")},
      {"amp",
       [&](const ConfigMember &m) {
         // Apex's amp.initialize arguments, which DeepSpeed passes on.
         context.checkKeys(m.value, "amp",
                           {"enabled", "opt_level", "cast_model_type",
                            "patch_torch_functions", "keep_batchnorm_fp32",
                            "master_weights", "loss_scale",
                            "cast_model_outputs", "num_losses", "verbosity",
                            "min_loss_scale", "max_loss_scale"});
         const ConfigNode *enabled =
             m.value.isMap() ? m.value.find("enabled") : nullptr;
         if (enabled && enabled->kind == ConfigNode::Kind::Bool &&
             enabled->boolean)
           context.unsupported(m, "NVIDIA Apex AMP is not supported; use "
                                  "bf16 or fp16 mixed precision");
         else
           context.noEffect(m, noEffect("Apex AMP is off"));
       }},
      {"sparse_attention",
       [&](const ConfigMember &m) {
         context.unsupported(m, "sparse attention is not supported: the "
                                "runtime's attention is dense and causal "
                                "(bidirectional for BERT)");
       }},
  };
  context.visit(root, "the DeepSpeed config", handlers);
  writeOptimizer();
  if (!precisionSet && !context.acceleratePrecision.empty())
    plan.set("train.precision", context.acceleratePrecision,
             "the Accelerate config's mixed_precision");
}

/// train_batch_size = micro x accumulation x world; DeepSpeed derives the
/// one of the three not given, and so does this from the options' world.
void DeepSpeedReader::readBatch(const ConfigNode &root) {
  auto member = [&](StringRef key) -> const ConfigMember * {
    for (const ConfigMember &m : root.members)
      if (m.key == key)
        return &m;
    return nullptr;
  };
  const ConfigMember *global = member("train_batch_size");
  const ConfigMember *micro = member("train_micro_batch_size_per_gpu");
  const ConfigMember *accum = member("gradient_accumulation_steps");

  // Each is checked at its key: what follows divides by them.
  size_t errorsBefore = diag.numErrors();
  std::optional<int64_t> microValue, accumValue, globalValue;
  if (options.microBatch) {
    microValue = options.microBatch;
    plan.set("train.micro_batch", std::to_string(*microValue),
             micro && isAuto(micro->value)
                 ? "auto: --micro-batch"
                 : "--micro-batch, over the config's");
  } else if (micro) {
    microValue = count(*micro);
    if (microValue)
      plan.set("train.micro_batch", std::to_string(*microValue),
               context.shown(*micro));
    else if (isAuto(micro->value)) {
      microValue = 8;
      plan.set("train.micro_batch", "8",
               "auto: the HF Trainer's per_device_train_batch_size");
    }
  }
  if (options.gradAccum) {
    accumValue = options.gradAccum;
  } else if (accum) {
    accumValue = count(*accum);
    std::string from = context.shown(*accum);
    if (!accumValue && isAuto(accum->value)) {
      accumValue = context.accelerateGradAccum.value_or(1);
      from = context.accelerateGradAccum
                 ? "auto: the Accelerate config's gradient_accumulation_steps"
                 : "auto: the HF Trainer's gradient_accumulation_steps";
    }
    if (accumValue)
      plan.set("train.grad_accum", std::to_string(*accumValue), from);
  } else if (context.accelerateGradAccum) {
    accumValue = context.accelerateGradAccum;
  }
  if (global)
    globalValue = count(*global);
  if (diag.numErrors() != errorsBefore)
    return;
  if (!globalValue) {
    if (global && isAuto(global->value))
      context.noEffect(*global, "follows: micro_batch x grad_accum x ranks");
    return;
  }

  // The world size: the options', else the Accelerate config's, else what
  // the batch sizes imply, over the machines known (one by default).
  std::optional<int64_t> nodes = options.nodes ? options.nodes : context.nodes;
  std::optional<int64_t> gpus =
      options.gpusPerNode ? options.gpusPerNode : context.gpusPerNode;
  std::optional<int64_t> world;
  std::string worldFrom;
  if (gpus) {
    // Counts below 2^31 each (checked at their key or option), so this
    // and micro x accumulation fit in 64 bits.
    world = *gpus * nodes.value_or(1);
    worldFrom = options.gpusPerNode ? "the options" : "the Accelerate config";
  }
  if (microValue && accumValue) {
    int64_t perRank = *microValue * *accumValue;
    if (*globalValue % perRank != 0) {
      diag.error(global->value.loc,
                 formatv("'train_batch_size' {0} is not a multiple of "
                         "micro_batch {1} x gradient_accumulation_steps {2}",
                         *globalValue, *microValue, *accumValue));
      return;
    }
    // The data-parallel ranks; each is a tensor group of `tensor` ranks.
    int64_t dataParallel = *globalValue / perRank;
    int64_t implied = dataParallel * tensor;
    std::string ranks =
        tensor > 1 ? formatv("{0} data-parallel ranks x tensor {1} = {2} ranks",
                             dataParallel, tensor, implied)
                         .str()
                   : formatv("{0} ranks", implied).str();
    if (world && *world != implied) {
      diag.error(global->value.loc,
                 formatv("'train_batch_size' {0} = {1} x {2} x {3}, but "
                         "{4} give {5} ranks",
                         *globalValue, *microValue, *accumValue, ranks,
                         worldFrom, *world));
      return;
    }
    if (!world) {
      int64_t machines = nodes.value_or(1);
      if (implied % machines != 0) {
        diag.error(global->value.loc,
                   formatv("'train_batch_size' {0} implies {1} ranks, which "
                           "{2} machines cannot share evenly",
                           *globalValue, implied, machines));
        return;
      }
      context.gpusPerNode = implied / machines;
      context.gpusPerNodeFrom =
          tensor > 1
              ? formatv("train_batch_size {0} / (micro_batch {1} x "
                        "gradient_accumulation_steps {2}) x autotp_size {3} "
                        "over {4} machine(s)",
                        *globalValue, *microValue, *accumValue, tensor,
                        machines)
                    .str()
              : formatv("train_batch_size {0} / (micro_batch {1} x "
                        "gradient_accumulation_steps {2}) over {3} "
                        "machine(s)",
                        *globalValue, *microValue, *accumValue, machines)
                    .str();
    }
    context.noEffect(*global,
                     formatv("{0} x {1} x {2}, the plan's micro_batch x "
                             "grad_accum x {3}",
                             *microValue, *accumValue, ranks,
                             tensor > 1 ? "data-parallel ranks" : "ranks")
                         .str());
    return;
  }
  if (microValue) {
    // The accumulation follows from the global batch (the plan's
    // global_batch derives grad_accum the way DeepSpeed does).
    plan.set("train.global_batch", std::to_string(*globalValue),
             context.shown(*global));
    return;
  }
  // No micro-batch: DeepSpeed takes train_batch_size / (accumulation x
  // world), which needs the world size.
  int64_t accumulation = accumValue.value_or(1);
  if (!world) {
    diag.error(global->value.loc,
               "'train_batch_size' without train_micro_batch_size_per_gpu "
               "needs the world size to give the micro-batch; pass "
               "--gpus-per-node (and --nodes), or --micro-batch");
    return;
  }
  // A product past 64 bits is past any train_batch_size too. A tensor
  // degree that does not divide the world is the plan's error at its key.
  std::optional<int64_t> perStep =
      llvm::checkedMul(accumulation, *world / tensor);
  if (!perStep || *globalValue % *perStep != 0) {
    diag.error(global->value.loc,
               formatv("'train_batch_size' {0} is not a multiple of "
                       "gradient_accumulation_steps {1} x {2} {3}",
                       *globalValue, accumulation, *world / tensor,
                       tensor > 1 ? "data-parallel ranks" : "ranks"));
    return;
  }
  plan.set("train.micro_batch", std::to_string(*globalValue / *perStep),
           formatv("train_batch_size {0} / (gradient_accumulation_steps {1} "
                   "x {2} {3})",
                   *globalValue, accumulation, *world / tensor,
                   tensor > 1 ? "data-parallel ranks" : "ranks")
               .str());
  context.noEffect(*global, "gives the micro-batch");
}

void DeepSpeedReader::readPrecision(const ConfigMember &m,
                                    StringRef precision) {
  if (!m.value.isMap()) {
    context.badValue(m, "a map with \"enabled\"");
    return;
  }
  const ConfigNode *enabledNode = m.value.find("enabled");
  bool enabled = false;
  std::string from = m.key + ".enabled";
  if (enabledNode && isAuto(*enabledNode)) {
    enabled = context.acceleratePrecision == precision;
    if (context.acceleratePrecision.empty())
      from += ": auto, and the HF Trainer's default is off";
    else if (enabled)
      from += ": auto: the Accelerate config's mixed_precision";
    else
      from += ": auto: the Accelerate config's mixed_precision gives " +
              context.acceleratePrecision;
  } else if (enabledNode) {
    enabled = readConfigBool(*enabledNode, "enabled", diag).value_or(false);
    from += enabled ? ": true" : ": false";
  } else {
    from = "no " + from + ": DeepSpeed's default is off";
  }

  // DeepSpeed's loss scaler: loss_scale 0 is dynamic from
  // 2^initial_scale_power, doubling after loss_scale_window clean steps.
  double scale = 0;
  int64_t power = 16, window = 1000;
  {
    PrefixScope scope(context, m.key + ".");
    // The keys of a section that is off set nothing, but a misspelt one is
    // still named. bf16 has none but enabled.
    auto ifOn = [&](std::function<void(const ConfigMember &)> read) {
      return [enabled, read](const ConfigMember &k) {
        if (enabled)
          read(k);
      };
    };
    auto notModelled = ifOn([&](const ConfigMember &k) {
      context.noEffect(k, "not modelled: the plan's dynamic scale is "
                          "torch.amp.GradScaler's, which halves on every "
                          "overflow and has no floor");
    });
    auto fp16Compute = ifOn([&](const ConfigMember &k) {
      context.noEffect(k, "no effect: fp16_mixed computes in fp16 and keeps "
                          "fp32 master weights");
    });
    std::vector<KeyHandler> handlers = {
        {"enabled", [](const ConfigMember &) {}}};
    if (precision == "fp16_mixed")
      handlers.insert(
          handlers.end(),
          {{"loss_scale", ifOn([&](const ConfigMember &k) {
              std::optional<double> v = number(k.value, k.key);
              if (v && *v < 0)
                diag.error(k.value.loc,
                           "'loss_scale' must be >= 0 (0 is dynamic), got " +
                               k.value.describe());
              else if (v)
                scale = *v;
            }),
            "0, dynamic"},
           {"initial_scale_power", ifOn([&](const ConfigMember &k) {
              // 2^62 is the largest power of two an int64_t holds.
              if (std::optional<int64_t> v = readConfigInteger(
                      k.value, k.key, diag, /*min=*/0, /*max=*/62))
                power = *v;
            }),
            "DeepSpeed's default, 16"},
           {"loss_scale_window", ifOn([&](const ConfigMember &k) {
              window = count(k).value_or(window);
            }),
            "DeepSpeed's default, 1000"},
           {"hysteresis", notModelled},
           {"consecutive_hysteresis", notModelled},
           {"min_loss_scale", notModelled},
           {"auto_cast", fp16Compute},
           {"fp16_master_weights_and_grads", fp16Compute}});
    context.visit(m.value, m.key, handlers);
  }
  if (!enabled) {
    context.noEffect(m, "off (" + from + ")");
    return;
  }
  if (precisionSet && *plan.get("train.precision") != precision) {
    diag.error(m.keyLoc, "fp16 and bf16 are both enabled; enable one");
    return;
  }
  precisionSet = true;
  plan.set("train.precision", precision.str(), from);
  if (precision != "fp16_mixed")
    return;
  if (scale > 0)
    plan.set("train.loss_scale", "static(" + planNumber(scale) + ")",
             "fp16.loss_scale: " + planNumber(scale));
  else
    plan.set("train.loss_scale",
             formatv("dynamic(initial = {0}, growth_interval = {1})",
                     int64_t(1) << power, window)
                 .str(),
             "fp16: loss_scale 0 (dynamic), 2^initial_scale_power, "
             "loss_scale_window");
}

} // namespace

void import::zeroStage(ImportContext &context, const ConfigMember &m) {
  std::optional<int64_t> stage =
      readConfigInteger(m.value, m.key, context.diag);
  if (!stage)
    return;
  switch (*stage) {
  case 0:
    context.plan.set("parallel.sharding", "no_shard",
                     context.shown(m) + ": DDP");
    return;
  case 1:
    // Stage 1 shards the optimizer state only: whole gradients accumulate
    // and are reduce-scattered once a step.
    context.plan.set("parallel.sharding", "zero1", context.shown(m));
    context.plan.set("parallel.grad_sync", "last_micro_batch",
                     context.shown(m) + ": whole gradients until the step");
    return;
  case 2:
    context.plan.set("parallel.sharding", "zero2", context.shown(m));
    return;
  case 3:
    context.plan.set("parallel.sharding", "zero3", context.shown(m));
    return;
  default:
    context.badValue(m, "0, 1, 2 or 3");
  }
}

void import::offloadDevice(ImportContext &context, const ConfigMember &m,
                           StringRef state, const ConfigNode *stage) {
  std::string device =
      m.value.kind == ConfigNode::Kind::Null ? "none" : m.value.text;
  if (device == "none") {
    context.noEffect(m, "nothing offloaded (the plan's default)");
    return;
  }
  if (device == "nvme") {
    context.unsupported(m, "NVMe offload is not supported yet: the plan "
                           "offloads to CPU memory (cpu) only; left on the "
                           "device");
    return;
  }
  if (device != "cpu") {
    context.badValue(m, "none, cpu or nvme");
    return;
  }
  // DeepSpeed refuses it too (its default stage is 0, Accelerate's 2).
  if (state == "params" &&
      (!stage || !stage->integer || *stage->integer != 3)) {
    context.diag.error(m.value.loc,
                       "parameters are offloaded only at ZeRO stage 3");
    return;
  }
  context.plan.set(("parallel.offload." + state).str(), "cpu",
                   context.shown(m));
}

namespace {

void DeepSpeedReader::readZero(const ConfigMember &zero) {
  if (!zero.value.isMap()) {
    context.badValue(zero, "a map with \"stage\"");
    return;
  }
  PrefixScope scope(context, "zero_optimization.");
  const ConfigNode *stage = zero.value.find("stage");
  int64_t hidden = context.model.hidden;
  auto none = [&](StringRef why) { return context.noEffectBecause(why.str()); };
  // A switch that is off, or on and not supported.
  auto unsupportedIfOn = [&](std::string why) {
    return [this, why](const ConfigMember &m) {
      if (m.value.kind == ConfigNode::Kind::Bool && m.value.boolean)
        context.unsupported(m, why);
      else
        context.noEffect(m, "off");
    };
  };
  // A size with no effect on the plan, still checked as DeepSpeed checks
  // it: an integer, at least 0.
  auto noEffectSize = [&](StringRef why) {
    return [this, why = why.str()](const ConfigMember &m) {
      if (readConfigInteger(m.value, m.key, diag, 0))
        context.noEffect(m, why);
    };
  };
  auto offload = [&](StringRef state) {
    return [this, state, stage](const ConfigMember &m) {
      if (!m.value.isMap()) {
        context.badValue(m, "a map with \"device\"");
        return;
      }
      PrefixScope scope(context, context.prefix + m.key + ".");
      auto staged = context.noEffectBecause("the plan stages whole units");
      KeyHandler handlers[] = {
          {"device",
           [&](const ConfigMember &k) {
             offloadDevice(context, k, state, stage);
           }},
          {"pin_memory",
           context.noEffectBecause("offloaded state is always in pinned "
                                   "memory")},
          {"nvme_path",
           [&](const ConfigMember &k) {
             context.noEffect(k, "used only with device nvme");
           }},
          {"buffer_count", staged},
          {"buffer_size", staged},
          {"max_in_cpu", staged},
          {"fast_init", staged},
          {"ratio",
           [&](const ConfigMember &k) {
             context.unsupported(k, "a partial optimizer offload is not "
                                    "supported: the whole optimizer state "
                                    "is offloaded");
           }},
      };
      context.visit(m.value, m.key, handlers);
    };
  };
  KeyHandler handlers[] = {
      {"stage", [&](const ConfigMember &m) { zeroStage(context, m); }},
      {"offload_optimizer", offload("optimizer")},
      {"offload_param", offload("params")},
      {"cpu_offload",
       [&](const ConfigMember &m) {
         if (m.value.kind == ConfigNode::Kind::Bool && m.value.boolean)
           context.plan.set("parallel.offload.optimizer", "cpu",
                            context.shown(m));
         else
           context.noEffect(m, "off");
       }},
      {"overlap_comm",
       none("collectives always overlap compute where the schedule allows "
            "(prefetch, asynchronous reductions)")},
      {"contiguous_gradients",
       none("each unit's gradients are one flat buffer")},
      {"reduce_bucket_size",
       [&, hidden, stage](const ConfigMember &m) {
         // "auto" is the HF Trainer's hidden^2. An HF config's hidden_size
         // is range-checked only when the plan compiles, so the products
         // are checked here: past 64 bits the plan fails on hidden anyway.
         std::optional<int64_t> elements =
             isAuto(m.value) ? llvm::checkedMul(hidden, hidden) : count(m);
         std::optional<int64_t> bytes =
             elements ? llvm::checkedMul(*elements, int64_t(4)) : std::nullopt;
         if (!bytes)
           return;
         // DeepSpeed's stage defaults to 0, whose all-reduces it buckets.
         bool stage0 = !stage || (stage->integer && *stage->integer == 0);
         if (!stage0) {
           context.noEffect(m, "no effect: sharded gradients are "
                               "reduce-scattered a unit at a time");
           return;
         }
         // Elements of the working dtype; the plan's bucket is bytes of
         // the gradients DDP reduces (fp32).
         context.plan.set("parallel.bucket", std::to_string(*bytes) + "B",
                          (isAuto(m.value)
                               ? "auto: the HF Trainer's hidden^2 elements"
                               : context.shown(m) + " elements") +
                              ", of 4-byte gradients");
       }},
      {"allgather_bucket_size",
       noEffectSize("parameters are all-gathered a unit at a time")},
      {"allgather_partitions",
       none("parameters are all-gathered a unit at a time")},
      {"reduce_scatter", none("sharded gradients are always reduce-scattered")},
      {"round_robin_gradients",
       none("gradients are not bucketed across units")},
      {"sub_group_size",
       noEffectSize("the optimizer steps one group's shard at a time")},
      {"elastic_checkpoint",
       none("checkpoints reshard to any world size (plan-run --resume)")},
      {"load_from_fp32_weights",
       none("resume always restores the fp32 master weights")},
      {"ignore_unused_parameters", none("every parameter is used")},
      {"legacy_stage1", none("stage 1 is the plan's zero1")},
      {"stage3_prefetch_bucket_size",
       none("the closest key is parallel.max_inflight_gathers, which counts "
            "units (default 2), not elements")},
      {"stage3_param_persistence_threshold",
       [&](const ConfigMember &m) {
         // 0 keeps no parameter whole, which is what the plan does.
         std::optional<int64_t> threshold =
             isAuto(m.value) ? std::optional<int64_t>(hidden * 10)
                             : readConfigInteger(m.value, m.key, diag, 0);
         if (!threshold)
           return;
         if (*threshold > 0)
           context.unsupported(m, "not supported: every parameter of a unit "
                                  "is sharded, small ones too");
         else
           context.noEffect(m, "no parameter is kept whole, as in the plan");
       }},
      {"stage3_max_live_parameters",
       none("the closest key is parallel.max_inflight_gathers, which counts "
            "units (default 2), not elements")},
      {"stage3_max_reuse_distance",
       none("a unit is gathered again for backward unless its parameters are "
            "kept (shard_grad_op)")},
      {"stage3_gather_16bit_weights_on_model_save",
       none("plan-checkpoint export writes the whole model in bf16 or fp16")},
      {"gather_16bit_weights_on_model_save",
       none("plan-checkpoint export writes the whole model in bf16 or fp16")},
      {"memory_efficient_linear", none("a DeepSpeed kernel choice")},
      {"use_multi_rank_bucket_allreduce", none("a DeepSpeed kernel choice")},
      {"zero_hpz_partition_size",
       [&](const ConfigMember &m) {
         // At least 0, as DeepSpeed checks it; 0 and 1 are off.
         std::optional<int64_t> size =
             readConfigInteger(m.value, m.key, diag, 0);
         if (size && *size > 1)
           context.unsupported(m, "ZeRO++ hpZ is not supported; the closest "
                                  "is sharding = hybrid_shard");
         else
           context.noEffect(m, "off");
       }},
      {"zero_quantized_weights",
       unsupportedIfOn("ZeRO++ quantized weights are not supported: gathers "
                       "move the working dtype")},
      {"zero_quantized_gradients",
       unsupportedIfOn("ZeRO++ quantized gradients are not supported: "
                       "reductions run in train.reduce_dtype")},
      {"mics_shard_size",
       [&](const ConfigMember &m) {
         // Any integer, as DeepSpeed takes it: -1, its default, and 0 are
         // off.
         std::optional<int64_t> size = readConfigInteger(m.value, m.key, diag);
         if (size && *size > 0)
           context.unsupported(m, "MiCS is not supported; the closest is "
                                  "sharding = hybrid_shard with mesh = "
                                  "(replicate, shard)");
         else
           context.noEffect(m, "off");
       }},
  };
  context.visit(zero.value, "zero_optimization", handlers);
}

std::optional<TypedSection>
DeepSpeedReader::readTypedSection(const ConfigMember &section) {
  if (!section.value.isMap()) {
    context.badValue(section, "a map with \"type\" and \"params\"");
    return std::nullopt;
  }
  TypedSection typed;
  typed.typeNode = section.value.find("type");
  if (typed.typeNode)
    typed.type = readConfigString(*typed.typeNode, "type", diag).value_or("");
  typed.params = section.value.find("params");
  PrefixScope scope(context, section.key + ".");
  auto read = [](const ConfigMember &) {}; // read above
  context.visit(section.value, section.key, {{"type", read}, {"params", read}});
  return typed;
}

void DeepSpeedReader::readOptimizer(const ConfigMember &optimizer) {
  std::optional<TypedSection> section = readTypedSection(optimizer);
  if (!section)
    return;
  const ConfigNode *typeNode = section->typeNode;
  const std::string &type = section->type;
  std::string lower = StringRef(type).lower();
  const ConfigNode *params = section->params;
  auto param = [&](StringRef key) { return section->param(key); };

  // The parameters `used` are read above; the others have no counterpart:
  // what each means.
  auto checkParams = [&](std::initializer_list<KeyHandler> used) {
    if (!params || !params->isMap())
      return;
    PrefixScope scope(context, "optimizer.params.");
    auto math = context.noEffectBecause("the plan's optimizer is "
                                        "torch.optim's math");
    auto unsupportedIfOn = [&](StringRef why) {
      return [this, math, why](const ConfigMember &k) {
        if (k.value.kind == ConfigNode::Kind::Bool && k.value.boolean)
          context.unsupported(k, why);
        else
          math(k);
      };
    };
    std::vector<KeyHandler> handlers(used);
    handlers.insert(
        handlers.end(),
        {{"amsgrad", unsupportedIfOn("AMSGrad is not supported: the plan's "
                                     "AdamW is torch.optim.AdamW's without "
                                     "it")},
         {"nesterov", unsupportedIfOn("Nesterov momentum is not supported")},
         {"torch_adam", math},
         {"adam_w_mode", math},
         {"bias_correction", math},
         {"fused", math},
         {"dampening", math}});
    context.visit(*params, "optimizer.params", handlers);
  };
  auto read = [](const ConfigMember &) {}; // by value() and argument()
  std::vector<std::string> &arguments = optimizerArguments;
  std::vector<std::string> &from = optimizerFrom;
  auto value = [&](StringRef key, double hfDefault) {
    const ConfigNode *node = param(key);
    std::optional<double> v;
    if (node && isAuto(*node)) {
      v = hfDefault;
      from.push_back((key + ": auto, the HF Trainer's").str());
    } else if (node) {
      v = number(*node, key);
    }
    return v;
  };
  auto argument = [&](StringRef key, double hfDefault) {
    if (std::optional<double> v = value(key, hfDefault))
      arguments.push_back((key + " = " + planNumber(*v)).str());
  };
  // Not by value(): writeOptimizer says where the rate comes from, once.
  auto readLr = [&] {
    const ConfigNode *node = param("lr");
    if (!node)
      return;
    lr = isAuto(*node) ? std::optional<double>(5e-5) : number(*node, "lr");
    lrFrom = isAuto(*node) ? "lr: auto, the HF Trainer's learning_rate"
                           : "lr: optimizer.params.lr: " + node->text;
  };

  if (lower == "adam" || lower == "adamw" || lower == "fusedadam" ||
      lower == "cpuadam") {
    if (const ConfigNode *mode = param("adam_w_mode");
        mode && mode->kind == ConfigNode::Kind::Bool && !mode->boolean) {
      diag.error(mode->loc, "Adam with L2 regularisation (adam_w_mode: "
                            "false) is not supported; the plan's adamw "
                            "decouples weight decay");
      return;
    }
    optimizerName = "adamw";
    readLr();
    if (const ConfigNode *betas = param("betas")) {
      if (isAuto(*betas)) {
        arguments.push_back("betas = (0.9, 0.999)");
        from.push_back("betas: auto, the HF Trainer's");
      } else if (betas->kind == ConfigNode::Kind::Sequence &&
                 betas->elements.size() == 2) {
        std::optional<double> b1 = number(betas->elements[0], "betas");
        std::optional<double> b2 = number(betas->elements[1], "betas");
        if (b1 && b2)
          arguments.push_back("betas = (" + planNumber(*b1) + ", " +
                              planNumber(*b2) + ")");
      } else {
        diag.error(betas->loc, "'betas' is " + betas->describe() +
                                   "; expected a list of two numbers");
      }
    }
    argument("eps", 1e-8);
    // DeepSpeed's Adam defaults weight_decay to 0, as the plan does.
    argument("weight_decay", 0.0);
    checkParams({{"lr", read},
                 {"betas", read},
                 {"eps", read},
                 {"weight_decay", read, "DeepSpeed's default, 0"}});
    from.insert(from.begin(), "optimizer: " + type);
    return;
  }
  if (lower == "sgd") {
    optimizerName = "sgd";
    readLr();
    if (!lr && !options.lr) {
      diag.error(optimizer.keyLoc, "the SGD optimizer needs params.lr");
      return;
    }
    argument("momentum", 0.0);
    argument("weight_decay", 0.0);
    checkParams({{"lr", read},
                 {"momentum", read, "torch.optim.SGD's default, 0"},
                 {"weight_decay", read, "torch.optim.SGD's default, 0"}});
    from.insert(from.begin(), "optimizer: " + type);
    return;
  }
  diag.error(typeNode ? typeNode->loc : optimizer.keyLoc,
             formatv("optimizer '{0}' is not supported; the plan has Adam / "
                     "AdamW (adamw) and SGD (sgd)",
                     type));
}

void DeepSpeedReader::writeOptimizer() {
  if (optimizerName.empty() && !warmupMaxLr)
    return; // the script's optimizer: fillTrain's default
  std::optional<double> rate;
  std::string rateFrom;
  if (options.lr) {
    rate = options.lr;
    rateFrom = "lr: --lr";
  } else if (warmupMaxLr) {
    rate = warmupMaxLr;
    rateFrom = "lr: " + warmupMaxLrFrom;
    if (lr && *lr != *warmupMaxLr)
      diag.warning(warmupMaxLrLoc,
                   formatv("the scheduler's warmup_max_lr {0} is the peak "
                           "learning rate, not the optimizer's lr {1}: "
                           "DeepSpeed's scheduler sets the rate",
                           planNumber(*warmupMaxLr), planNumber(*lr)));
  } else if (lr) {
    rate = lr;
    rateFrom = lrFrom;
  } else {
    rate = 5e-5;
    rateFrom = "lr: not given, the HF Trainer's learning_rate";
  }
  std::vector<std::string> arguments = optimizerArguments;
  arguments.insert(arguments.begin(), "lr = " + planNumber(*rate));
  std::vector<std::string> from = optimizerFrom;
  std::string name = optimizerName.empty() ? "adamw" : optimizerName;
  if (optimizerName.empty())
    from.insert(from.begin(), "no optimizer section: the HF Trainer's AdamW");
  // The rate's source after the optimizer's, as lr is its first argument.
  from.insert(from.begin() + 1, rateFrom);
  plan.set("train.optimizer", name + "(" + llvm::join(arguments, ", ") + ")",
           llvm::join(from, "; "));
}

void DeepSpeedReader::readScheduler(const ConfigMember &scheduler) {
  std::optional<TypedSection> section = readTypedSection(scheduler);
  if (!section)
    return;
  const ConfigNode *typeNode = section->typeNode;
  const std::string &type = section->type;
  const ConfigNode *params = section->params;
  auto param = [&](StringRef key) { return section->param(key); };
  auto steps = [&](StringRef key, int64_t fallback, int64_t min) -> int64_t {
    const ConfigNode *node = param(key);
    if (!node || isAuto(*node))
      return fallback;
    return readConfigInteger(*node, key, diag, min).value_or(fallback);
  };
  // DeepSpeed's default is 1000 warmup steps; "auto" is the HF Trainer's
  // warmup_steps, 0.
  const ConfigNode *warmupSteps = param("warmup_num_steps");
  int64_t warmup = warmupSteps && isAuto(*warmupSteps)
                       ? 0
                       : steps("warmup_num_steps", 1000, /*min=*/0);
  // DeepSpeed's warmup is logarithmic unless warmup_type says "linear".
  const ConfigNode *warmupType = param("warmup_type");
  if (warmup > 0 && (!warmupType || warmupType->text != "linear"))
    diag.warning(warmupType ? warmupType->loc : scheduler.keyLoc,
                 "DeepSpeed's logarithmic warmup (warmup_type \"log\", its "
                 "default) is written as the plan's linear warmup");
  if (const ConfigNode *minLr = param("warmup_min_lr"))
    if (std::optional<double> v = number(*minLr, "warmup_min_lr");
        warmup > 0 && v && *v != 0)
      diag.warning(minLr->loc, "the plan's warmup starts from 0, not from "
                               "warmup_min_lr");
  std::string from = "scheduler: " + type;
  if (!warmupSteps)
    from += ", warmup_num_steps not given: DeepSpeed's default 1000";
  // WarmupLR and WarmupDecayLR rise to warmup_max_lr (DeepSpeed's default
  // 0.001), whatever the optimizer's lr; "auto" is the Trainer's
  // learning_rate, which is the optimizer's too.
  if (type == "WarmupLR" || type == "WarmupDecayLR") {
    const ConfigNode *maxLr = param("warmup_max_lr");
    if (!maxLr) {
      warmupMaxLr = 0.001;
      warmupMaxLrFrom = "DeepSpeed's default warmup_max_lr 0.001 (" + type +
                        " sets the rate)";
      warmupMaxLrLoc = scheduler.keyLoc;
    } else if (!isAuto(*maxLr)) {
      warmupMaxLr = number(*maxLr, "warmup_max_lr");
      warmupMaxLrFrom = "scheduler.params.warmup_max_lr: " + maxLr->text;
      warmupMaxLrLoc = maxLr->loc;
    }
  }
  if (params && params->isMap()) {
    PrefixScope scope(context, "scheduler.params.");
    auto read = [](const ConfigMember &) {}; // read above and below
    KeyHandler handlers[] = {
        {"warmup_num_steps", read, "DeepSpeed's default, 1000"},
        {"warmup_type", read, "DeepSpeed's default, log"},
        {"warmup_min_lr", read, "DeepSpeed's default, 0"},
        {"warmup_max_lr", read, "DeepSpeed's default, 0.001"},
        {"total_num_steps", read},
        {"cos_min_ratio", read, "DeepSpeed's default, 0.0001"},
        {"last_batch_iteration",
         context.noEffectBecause("plan-run --resume restores the "
                                 "schedule's step")},
        {"warmup_min_ratio",
         [&](const ConfigMember &k) {
           if (k.value.kind == ConfigNode::Kind::Number && k.value.number == 0)
             context.noEffect(k, "the plan's warmup starts from 0");
           else
             context.unsupported(k, "not supported by the plan's schedules, "
                                    "left out");
         }},
    };
    context.visit(*params, "scheduler.params", handlers);
  }
  if (type == "WarmupLR") {
    if (warmup == 0)
      context.noEffect(scheduler, "no warmup: the plan's default constant "
                                  "learning rate");
    else
      plan.set("train.lr_schedule", formatv("constant(warmup = {0})", warmup),
               from);
    return;
  }
  if (type == "WarmupDecayLR" || type == "WarmupCosineLR") {
    const ConfigNode *total = param("total_num_steps");
    if (!total || isAuto(*total)) {
      diag.error(total ? total->loc : scheduler.keyLoc,
                 type + " needs total_num_steps (\"auto\" is the script's "
                        "max_steps, which the config does not hold)");
      return;
    }
    int64_t totalSteps = steps("total_num_steps", 0, /*min=*/1);
    plan.set("train.steps", std::to_string(totalSteps),
             "scheduler.params.total_num_steps");
    if (type == "WarmupDecayLR") {
      plan.set("train.lr_schedule", formatv("linear(warmup = {0})", warmup),
               from);
      return;
    }
    double ratio = 0.0001; // WarmupCosineLR's cos_min_ratio default
    if (const ConfigNode *node = param("cos_min_ratio"))
      ratio = number(*node, "cos_min_ratio").value_or(ratio);
    plan.set("train.lr_schedule",
             formatv("cosine(warmup = {0}, min_lr_ratio = {1})", warmup,
                     planNumber(ratio))
                 .str(),
             from);
    return;
  }
  diag.error(typeNode ? typeNode->loc : scheduler.keyLoc,
             formatv("scheduler '{0}' is not supported; the plan has "
                     "WarmupLR, WarmupDecayLR and WarmupCosineLR",
                     type));
}

} // namespace

void import::importDeepSpeed(const ConfigNode &root, ImportContext &context) {
  DeepSpeedReader(context).read(root);
}
