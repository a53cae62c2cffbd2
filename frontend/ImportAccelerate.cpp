//===- ImportAccelerate.cpp - planc import accelerate ---------------------===//
//
// The keys `accelerate config` writes (Accelerate 1.x): the top-level ones,
// `fsdp_config` (FSDP1 and FSDP2) and `deepspeed_config` (which may name a
// DeepSpeed JSON). Each either sets a plan key or is listed with what it
// means here. docs/importing.md has the table.
//
//===----------------------------------------------------------------------===//

#include "frontend/Analyze.h"
#include "frontend/ImportedPlan.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

using namespace plan;
using namespace plan::import;
using llvm::formatv;
using llvm::StringRef;

namespace {

constexpr StringRef kLaunch =
    "a launch setting, not a plan one: give it to the launcher (torchrun "
    "--nnodes/--node-rank/--master-addr/--master-port, or MASTER_ADDR and "
    "MASTER_PORT for plan-run)";

/// FSDP's ShardingStrategy, by name or by Accelerate's older numbers.
std::optional<std::pair<std::string, bool>>
fsdpStrategy(const ConfigNode &value) {
  // The bool: whether it replicates across nodes (hybrid).
  static const std::tuple<StringRef, int, StringRef, bool> strategies[] = {
      {"FULL_SHARD", 1, "full_shard", false},
      {"SHARD_GRAD_OP", 2, "shard_grad_op", false},
      {"NO_SHARD", 3, "no_shard", false},
      {"HYBRID_SHARD", 4, "hybrid_shard", true},
      {"HYBRID_SHARD_ZERO2", 5, "shard_grad_op", true},
  };
  for (auto [name, number, sharding, hybrid] : strategies)
    if ((value.kind == ConfigNode::Kind::String &&
         StringRef(value.text).equals_insensitive(name)) ||
        (value.kind == ConfigNode::Kind::Number && value.integer &&
         *value.integer == number))
      return std::make_pair(sharding.str(), hybrid);
  return std::nullopt;
}

/// The HF class of the model's decoder/encoder layer, which
/// `fsdp_transformer_layer_cls_to_wrap` names.
llvm::SmallVector<StringRef> layerClasses(ModelFamily family) {
  switch (family) {
  case ModelFamily::Llama:
    return {"LlamaDecoderLayer", "MistralDecoderLayer"};
  case ModelFamily::GPT2:
    return {"GPT2Block"};
  case ModelFamily::Bert:
    return {"BertLayer"};
  }
  return {};
}

class AccelerateReader {
public:
  AccelerateReader(ImportContext &context, StringRef path)
      : context(context), plan(context.plan), diag(context.diag), path(path) {}

  void read(const ConfigNode &root);

private:
  void readTop(const ConfigNode &root);
  /// Whether a plugin section applies (distributed_type is `type`); it is
  /// listed as having no effect otherwise.
  bool pluginApplies(const ConfigMember &plugin, StringRef type);
  void readFsdp(const ConfigMember &fsdp);
  void readDeepSpeed(const ConfigMember &deepspeed);
  /// Accelerate's ParallelismConfig (`parallelism_config`): the tensor
  /// degree and the data-parallel mesh.
  void readParallelism(const ConfigMember &config);

  std::optional<bool> flag(const ConfigMember &member) {
    return readConfigBool(member.value, member.key, diag);
  }
  std::optional<int64_t> integer(const ConfigMember &member) {
    return readConfigInteger(member.value, member.key, diag);
  }

  ImportContext &context;
  PlanWriter &plan;
  DiagEmitter &diag;
  StringRef path;
  std::string distributedType = "NO";
  // FSDP settings read before they can be written (the mesh needs the world
  // size, min_num_params the wrap policy).
  std::optional<std::pair<std::string, bool>> strategy;
  std::string strategyFrom;
  // fsdp_sharding_strategy and fsdp_reshard_after_forward say the same
  // thing; FSDP2 reads the second, FSDP1 the first.
  std::optional<std::pair<std::string, bool>> byStrategyKey, byReshardKey;
  const ConfigMember *strategyMember = nullptr, *reshardMember = nullptr;
  bool fsdp2 = false;
  std::string wrapPolicy; // TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP, NO_WRAP
  const ConfigMember *minNumParams = nullptr;
  const ConfigMember *layerClassNames = nullptr;
  const ConfigMember *deepspeedConfig = nullptr;
  int64_t tensor = 1; // parallelism_config_tp_size
};

void AccelerateReader::read(const ConfigNode &root) {
  if (const ConfigNode *type = root.find("distributed_type"))
    if (std::optional<std::string> text =
            readConfigString(*type, "distributed_type", diag))
      distributedType = *text;
  readTop(root);
  // After the top level, whose mixed_precision and gradient_accumulation_steps
  // fill DeepSpeed's "auto" values, wherever they are in the file.
  if (deepspeedConfig)
    readDeepSpeed(*deepspeedConfig);

  // Written once the world size and the wrap policy are known.
  if (strategy) {
    auto [sharding, hybrid] = *strategy;
    int64_t nodes = context.options.nodes.value_or(context.nodes.value_or(1));
    std::optional<int64_t> gpus = context.options.gpusPerNode
                                      ? context.options.gpusPerNode
                                      : context.gpusPerNode;
    if (hybrid && nodes == 1) {
      // One machine: FSDP's hybrid strategies shard over all of it.
      if (sharding == "hybrid_shard")
        sharding = "full_shard";
      strategyFrom += " on one machine, which shards over all its GPUs";
    }
    plan.set("parallel.sharding", sharding, strategyFrom);
    if (hybrid && nodes > 1 && sharding == "shard_grad_op" && gpus &&
        *gpus % tensor == 0)
      // _HYBRID_SHARD_ZERO2: shard within a machine (the ranks its tensor
      // groups leave), replicate across them.
      plan.set("parallel.mesh",
               formatv("({0}, {1})", nodes, *gpus / tensor).str(),
               "HYBRID_SHARD_ZERO2: shard within each machine, replicate "
               "across machines");
  }
  if (distributedType == "FSDP") {
    if (wrapPolicy.empty()) {
      // Accelerate's FullyShardedDataParallelPlugin: NO_WRAP.
      wrapPolicy = "NO_WRAP";
      plan.set("parallel.wrap", "whole_model",
               "no fsdp_auto_wrap_policy: Accelerate's default NO_WRAP");
    }
    if (wrapPolicy == "SIZE_BASED_WRAP") {
      // Accelerate wraps nothing when min_num_params is 0 or not given.
      std::optional<int64_t> n =
          minNumParams ? readConfigInteger(minNumParams->value,
                                           minNumParams->key, diag, /*min=*/0)
                       : std::optional<int64_t>(0);
      if (n && *n > 0)
        plan.set("parallel.wrap", "min_params(" + std::to_string(*n) + ")",
                 "fsdp_auto_wrap_policy: SIZE_BASED_WRAP, " +
                     context.shown(*minNumParams));
      else if (n)
        plan.set("parallel.wrap", "whole_model",
                 "fsdp_auto_wrap_policy: SIZE_BASED_WRAP without "
                 "fsdp_min_num_params > 0, which Accelerate does not wrap");
    } else if (minNumParams) {
      context.noEffect(*minNumParams,
                       "no effect: used only with SIZE_BASED_WRAP");
    }
    if (layerClassNames) {
      if (wrapPolicy != "TRANSFORMER_BASED_WRAP") {
        context.noEffect(*layerClassNames,
                         "no effect: used only with TRANSFORMER_BASED_WRAP");
      } else if (std::optional<std::string> names = readConfigString(
                     layerClassNames->value, layerClassNames->key, diag)) {
        llvm::SmallVector<StringRef> listed;
        StringRef(*names).split(listed, ',', -1, /*KeepEmpty=*/false);
        llvm::SmallVector<StringRef> ours = layerClasses(context.model.family);
        bool matches = llvm::any_of(listed, [&](StringRef name) {
          return llvm::is_contained(ours, name.trim());
        });
        if (matches)
          context.noEffect(*layerClassNames,
                           "the model's layer class: wrap = "
                           "transformer_block makes one unit of each layer");
        else
          context.unsupported(
              *layerClassNames,
              formatv("names no layer of this {0} model, whose layers are "
                      "{1}; wrap = transformer_block makes one unit of each "
                      "of those",
                      stringify(context.model.family), ours.front()));
      }
    }
  }
}

void AccelerateReader::readTop(const ConfigNode &root) {
  auto launch = [&](const ConfigMember &m) { context.noEffect(m, kLaunch); };
  auto none = [&](StringRef why) { return context.noEffectBecause(why.str()); };
  KeyHandler handlers[] = {
      {"compute_environment",
       [&](const ConfigMember &m) {
         if (m.value.text == "LOCAL_MACHINE")
           context.noEffect(m, "no effect: machines of your own");
         else
           context.unsupported(m, "only LOCAL_MACHINE is supported: plan-run "
                                  "runs on machines of your own");
       }},
      {"distributed_type",
       [&](const ConfigMember &m) {
         StringRef type = distributedType;
         if (type == "NO" || type == "MULTI_GPU" || type == "MULTI_CPU") {
           if (type == "MULTI_CPU")
             context.useCpu = true;
           plan.set("parallel.sharding", "no_shard",
                    context.shown(m) + ": DDP, every rank a full replica");
         } else if (type == "FSDP") {
           // fsdp_config sets the strategy; FULL_SHARD when it does not.
           if (!strategy) {
             strategy = std::make_pair(std::string("full_shard"), false);
             strategyFrom = "distributed_type: FSDP, FSDP's default FULL_SHARD";
           }
         } else if (type == "DEEPSPEED") {
           // deepspeed_config sets the stage.
         } else {
           context.badValue(m, "NO, MULTI_GPU, MULTI_CPU, FSDP or DEEPSPEED "
                               "(the others are not supported)");
         }
       }},
      {"mixed_precision",
       [&](const ConfigMember &m) {
         // PyYAML reads an unquoted `no` as false.
         std::string value =
             m.value.kind == ConfigNode::Kind::Bool && !m.value.boolean
                 ? "no"
                 : m.value.text;
         StringRef precision = llvm::StringSwitch<StringRef>(value)
                                   .Case("no", "fp32")
                                   .Case("bf16", "bf16_mixed")
                                   .Case("fp16", "fp16_mixed")
                                   .Default("");
         if (precision.empty()) {
           context.badValue(m, "no, bf16 or fp16 (fp8 is not supported)");
           return;
         }
         context.acceleratePrecision = precision.str();
         plan.set("train.precision", precision.str(), context.shown(m));
       }},
      {"num_machines",
       [&](const ConfigMember &m) {
         if (std::optional<int64_t> n = context.count(m)) {
           context.nodes = *n;
           context.nodesFrom = context.shown(m);
         }
       }},
      {"num_processes",
       [&](const ConfigMember &m) {
         std::optional<int64_t> n = context.count(m);
         if (!n)
           return;
         // num_machines is checked at its own key; a bad one is not
         // reported again here.
         const ConfigNode *machines = root.find("num_machines");
         int64_t nodes = 1;
         if (machines && machines->integer)
           nodes = *machines->integer;
         if (nodes < 1 || nodes > kMaxCount)
           return;
         if (*n % nodes != 0) {
           diag.error(m.value.loc,
                      formatv("'num_processes' is {0}, which {1} machine(s) "
                              "cannot share evenly; a plan runs the same "
                              "number of processes on every machine",
                              *n, nodes));
           return;
         }
         context.gpusPerNode = *n / nodes;
         context.gpusPerNodeFrom =
             formatv("num_processes: {0} over {1} machine(s)", *n, nodes);
       }},
      {"gradient_accumulation_steps",
       [&](const ConfigMember &m) { context.readAccelerateGradAccum(m); }},
      {"use_cpu",
       [&](const ConfigMember &m) {
         if (std::optional<bool> cpu = flag(m)) {
           context.useCpu |= *cpu;
           if (!*cpu)
             context.noEffect(m, "no effect: the device is cluster.gpu");
         }
       }},
      {"fsdp_config", [&](const ConfigMember &m) { readFsdp(m); }},
      {"parallelism_config",
       [&](const ConfigMember &m) { readParallelism(m); }},
      {"deepspeed_config",
       [&](const ConfigMember &m) { deepspeedConfig = &m; }},
      {"machine_rank", launch},
      {"main_process_ip", launch},
      {"main_process_port", launch},
      {"rdzv_backend", launch},
      {"same_network", launch},
      {"gpu_ids", none("plan-run uses the first gpus_per_node devices it "
                       "sees; set CUDA_VISIBLE_DEVICES to choose them")},
      {"debug", none("the schedule's collectives are checked when it is "
                     "compiled and again when each rank reads it")},
      {"downcast_bf16", none("a TPU setting")},
      {"enable_cpu_affinity", none("plan-run does not pin processes to cores")},
      {"main_training_function",
       none("the training script's entry point; plan-run runs the "
            "schedule")},
      {"tpu_env", none("a TPU setting")},
      {"tpu_use_cluster", none("a TPU setting")},
      {"tpu_use_sudo", none("a TPU setting")},
      {"tpu_name", none("a TPU setting")},
      {"tpu_zone", none("a TPU setting")},
      {"commands", none("a TPU setting")},
      {"command_file", none("a TPU setting")},
      {"dynamo_config",
       [&](const ConfigMember &m) {
         context.checkKeys(m.value, "dynamo_config",
                           {"dynamo_backend", "dynamo_mode",
                            "dynamo_use_fullgraph", "dynamo_use_dynamic",
                            "dynamo_use_regional_compilation"});
         const ConfigNode *backend =
             m.value.isMap() ? m.value.find("dynamo_backend") : nullptr;
         if (!backend || backend->text == "NO")
           context.noEffect(m, "no effect: torch.compile is off");
         else
           context.unsupported(m, "torch.compile is not used: the runtime "
                                  "runs LibTorch's kernels as they are");
       }},
  };
  context.visit(root, "the Accelerate config", handlers);
}

void AccelerateReader::readParallelism(const ConfigMember &config) {
  if (!config.value.isMap()) {
    context.badValue(config, "a map of parallelism_config keys");
    return;
  }
  auto none = [&](StringRef why) { return context.noEffectBecause(why.str()); };
  const ConfigMember *replicate = nullptr, *shard = nullptr;
  std::optional<int64_t> replicateSize, shardSize;
  KeyHandler handlers[] = {
      {"parallelism_config_tp_size",
       [&](const ConfigMember &m) {
         std::optional<int64_t> n = context.count(m);
         if (!n)
           return;
         tensor = *n;
         if (*n == 1)
           context.noEffect(m, "no effect: no tensor parallelism (tensor = "
                               "1, the plan's default)");
         else
           plan.set("parallel.tensor", std::to_string(*n), context.shown(m));
       }},
      {"parallelism_config_dp_replicate_size",
       [&](const ConfigMember &m) {
         replicate = &m;
         replicateSize = context.count(m);
       }},
      {"parallelism_config_dp_shard_size",
       [&](const ConfigMember &m) {
         shard = &m;
         shardSize = context.count(m);
       }},
      {"parallelism_config_cp_size",
       [&](const ConfigMember &m) {
         std::optional<int64_t> n = context.count(m);
         if (n && *n == 1)
           context.noEffect(m, "no effect: no context parallelism");
         else if (n)
           context.unsupported(
               m, "context parallelism (attention over a sequence split "
                  "between ranks) is not supported; sequence_parallel = true "
                  "splits a tensor group's norms and dropout by the "
                  "sequence instead");
       }},
      {"parallelism_config_cp_comm_strategy",
       none("used only with context parallelism")},
      {"parallelism_config_cp_backend",
       none("used only with context parallelism")},
  };
  context.visit(config.value, "parallelism_config", handlers);

  // The data-parallel mesh, when the config makes one: Accelerate's
  // (dp_replicate, dp_shard) is the plan's (replicate, shard).
  int64_t r = replicateSize.value_or(1), s = shardSize.value_or(1);
  if ((replicate && !replicateSize) || (shard && !shardSize))
    return; // reported at the key
  if (r > 1 || s > 1) {
    std::string from;
    for (const ConfigMember *m : {replicate, shard})
      if (m)
        from += (from.empty() ? "" : ", ") + context.shown(*m);
    plan.set("parallel.mesh", formatv("({0}, {1})", r, s).str(), from);
  } else {
    for (const ConfigMember *m : {replicate, shard})
      if (m)
        context.noEffect(*m, "no effect: the mesh follows the sharding "
                             "(docs/language.md, derived defaults)");
  }
}

bool AccelerateReader::pluginApplies(const ConfigMember &plugin,
                                     StringRef type) {
  if (!plugin.value.isMap()) {
    context.badValue(plugin, "a map of " + type.str() + " plugin keys");
    return false;
  }
  if (distributedType == type)
    return true;
  if (!plugin.value.members.empty())
    context.noEffect(plugin, "no effect: distributed_type is " +
                                 distributedType + ", not " + type.str());
  return false;
}

void AccelerateReader::readFsdp(const ConfigMember &fsdp) {
  if (!pluginApplies(fsdp, "FSDP"))
    return;
  if (const ConfigNode *version = fsdp.value.find("fsdp_version"))
    fsdp2 = version->integer && *version->integer == 2;
  auto foreign = [&](const ConfigMember &m) {
    StringRef key = StringRef(m.key).drop_front(strlen("fsdp_"));
    context.noEffect(m, "no effect: " + foreignParallelKeyMeaning(key).str());
  };
  KeyHandler handlers[] = {
      {"fsdp_sharding_strategy",
       [&](const ConfigMember &m) {
         byStrategyKey = fsdpStrategy(m.value);
         strategyMember = &m;
         if (!byStrategyKey)
           context.badValue(m, "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, "
                               "HYBRID_SHARD or HYBRID_SHARD_ZERO2 (or 1-5)");
       }},
      {"fsdp_reshard_after_forward",
       [&](const ConfigMember &m) {
         // FSDP2's bool; Accelerate's FSDP1 configs may hold the strategy
         // under this name instead.
         reshardMember = &m;
         if (m.value.kind == ConfigNode::Kind::Bool)
           byReshardKey = std::make_pair(
               std::string(m.value.boolean ? "full_shard" : "shard_grad_op"),
               false);
         else if (!(byReshardKey = fsdpStrategy(m.value)))
           context.badValue(m, "true, false, or an FSDP sharding strategy");
       }},
      {"fsdp_version",
       [&](const ConfigMember &m) {
         std::optional<int64_t> version = integer(m);
         if (version && *version != 1 && *version != 2)
           context.badValue(m, "1 or 2");
         else
           context.noEffect(m, "no effect: FSDP1 and FSDP2 shard alike here "
                               "(each unit's parameters, gathered and "
                               "reduced together)");
       }},
      {"fsdp_offload_params",
       [&](const ConfigMember &m) {
         std::optional<bool> offload = flag(m);
         if (!offload)
           return;
         if (!*offload) {
           context.noEffect(m, "nothing is offloaded (the plan's default)");
           return;
         }
         // FSDP's CPUOffload(offload_params=True) keeps all three on the CPU
         // and steps there.
         plan.set("parallel.offload.params", "cpu", context.shown(m));
         plan.set("parallel.offload.grads", "cpu", context.shown(m));
         plan.set("parallel.offload.optimizer", "cpu", context.shown(m));
       }},
      {"fsdp_auto_wrap_policy",
       [&](const ConfigMember &m) {
         std::string policy = m.value.text;
         if (policy == "TRANSFORMER_BASED_WRAP")
           plan.set("parallel.wrap", "transformer_block", context.shown(m));
         else if (policy == "NO_WRAP")
           plan.set("parallel.wrap", "whole_model", context.shown(m));
         else if (policy != "SIZE_BASED_WRAP") {
           context.badValue(
               m, "TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP or NO_WRAP");
           return;
         }
         wrapPolicy = policy;
       }},
      {"fsdp_transformer_layer_cls_to_wrap",
       [&](const ConfigMember &m) { layerClassNames = &m; }},
      {"fsdp_min_num_params",
       [&](const ConfigMember &m) { minNumParams = &m; }},
      {"fsdp_backward_prefetch",
       [&](const ConfigMember &m) {
         StringRef value = llvm::StringSwitch<StringRef>(m.value.text)
                               .Case("BACKWARD_PRE", "pre")
                               .Case("BACKWARD_POST", "post")
                               .Case("NO_PREFETCH", "none")
                               .Default("");
         if (m.value.isNull())
           value = "none";
         if (value.empty())
           context.badValue(m, "BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH");
         else if (fsdp2)
           context.noEffect(m, "no effect with fsdp_version 2, which "
                               "prefetches on its own; the plan keeps its "
                               "default backward_prefetch = pre");
         else
           plan.set("parallel.backward_prefetch", value.str(),
                    context.shown(m));
       }},
      {"fsdp_forward_prefetch",
       [&](const ConfigMember &m) {
         if (std::optional<bool> value = flag(m))
           plan.set("parallel.forward_prefetch", *value ? "true" : "false",
                    context.shown(m));
       }},
      {"fsdp_activation_checkpointing",
       [&](const ConfigMember &m) {
         if (std::optional<bool> value = flag(m))
           plan.set("train.activation_checkpointing", *value ? "full" : "none",
                    context.shown(m));
       }},
      {"fsdp_state_dict_type", foreign},
      {"fsdp_sync_module_states", foreign},
      {"fsdp_use_orig_params", foreign},
      {"fsdp_cpu_ram_efficient_loading", foreign},
  };
  context.visit(fsdp.value, "fsdp_config", handlers);

  // Either key, wherever it is in the file; both: the one the FSDP version
  // reads, and a warning when they disagree.
  const ConfigMember *read = fsdp2 ? reshardMember : strategyMember;
  const ConfigMember *other = fsdp2 ? strategyMember : reshardMember;
  std::optional<std::pair<std::string, bool>> readValue =
      fsdp2 ? byReshardKey : byStrategyKey;
  std::optional<std::pair<std::string, bool>> otherValue =
      fsdp2 ? byStrategyKey : byReshardKey;
  if (!read) {
    std::swap(read, other);
    std::swap(readValue, otherValue);
  }
  if (read && readValue) {
    strategy = readValue;
    strategyFrom = context.shown(*read);
  }
  if (other && otherValue && readValue && *otherValue != *readValue)
    context.unsupported(*other,
                        formatv("disagrees with {0}, which FSDP{1} reads; "
                                "the plan follows {0}",
                                read->key, fsdp2 ? 2 : 1));
  else if (other)
    context.noEffect(*other, "the same as " + read->key);
}

void AccelerateReader::readDeepSpeed(const ConfigMember &deepspeed) {
  if (!pluginApplies(deepspeed, "DEEPSPEED"))
    return;
  // With a config file, Accelerate takes everything from it and ignores the
  // plugin's other keys but the launcher's.
  if (const ConfigNode *file = deepspeed.value.find("deepspeed_config_file")) {
    std::optional<std::string> name =
        readConfigString(*file, "deepspeed_config_file", diag);
    if (!name)
      return;
    // Accelerate opens it from the working directory; a config kept next to
    // its YAML is found there too.
    llvm::SmallString<256> full(*name);
    if (!llvm::sys::path::is_absolute(full) && !llvm::sys::fs::exists(full)) {
      llvm::SmallString<256> besideYaml = llvm::sys::path::parent_path(path);
      llvm::sys::path::append(besideYaml, *name);
      if (llvm::sys::fs::exists(besideYaml))
        full = besideYaml;
    }
    std::string error;
    std::optional<ConfigNode> json = readConfigDocument(
        context.sourceMgr, diag, full, ConfigFormat::Json, error);
    if (!json) {
      if (!error.empty())
        diag.error(file->loc, "deepspeed_config_file: " + error);
      return;
    }
    for (const ConfigMember &m : deepspeed.value.members)
      if (m.key != "deepspeed_config_file" &&
          m.key != "deepspeed_multinode_launcher")
        context.noEffect(m, "no effect: Accelerate takes it from "
                            "deepspeed_config_file");
      else if (m.key == "deepspeed_multinode_launcher")
        context.noEffect(m, kLaunch.str());
    importDeepSpeed(*json, context);
    return;
  }

  auto none = [&](StringRef why) { return context.noEffectBecause(why.str()); };
  PrefixScope scope(context, "deepspeed_config.");
  const ConfigNode *stage = deepspeed.value.find("zero_stage");
  KeyHandler handlers[] = {
      {"zero_stage", [&](const ConfigMember &m) { zeroStage(context, m); }},
      {"offload_optimizer_device",
       [&](const ConfigMember &m) {
         offloadDevice(context, m, "optimizer", stage);
       }},
      {"offload_param_device",
       [&](const ConfigMember &m) {
         offloadDevice(context, m, "params", stage);
       }},
      {"gradient_accumulation_steps",
       [&](const ConfigMember &m) { context.readAccelerateGradAccum(m); }},
      {"gradient_clipping",
       [&](const ConfigMember &m) {
         if (std::optional<double> clip =
                 readConfigNumber(m.value, m.key, diag)) {
           context.accelerateGradClip = *clip;
           if (*clip > 0)
             plan.set("train.grad_clip", planNumber(*clip), context.shown(m));
           else
             context.noEffect(m, "no clipping (the plan's default)");
         }
       }},
      {"zero3_init_flag",
       none("every rank builds only its own shards (zero.Init's point)")},
      {"zero3_save_16bit_model",
       none("checkpoints are sharded; plan-checkpoint export writes the "
            "whole model in bf16 or fp16")},
      {"deepspeed_multinode_launcher",
       [&](const ConfigMember &m) { context.noEffect(m, kLaunch.str()); }},
      {"offload_optimizer_nvme_path",
       none("used only with offload_optimizer_device: nvme")},
      {"offload_param_nvme_path",
       none("used only with offload_param_device: nvme")},
  };
  context.visit(deepspeed.value, "deepspeed_config", handlers);
  if (!stage)
    plan.set("parallel.sharding", "zero2",
             "no zero_stage: Accelerate's DeepSpeed default, stage 2");
}

} // namespace

void import::importAccelerate(const ConfigNode &root, ImportContext &context,
                              StringRef path) {
  AccelerateReader(context, path).read(root);
}
