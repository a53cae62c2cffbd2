//===- ImportedPlan.cpp - planc import: the plan and its defaults ---------===//
//
// The driver of `planc import`: resolves --model, reads the config with the
// reader of its kind, then fills what a plan needs and the config leaves to
// the script or the launcher (the world size, the device, the batch, the
// sequence length, the optimizer), from the options or from the HF Trainer's
// defaults, each line saying which.
//
//===----------------------------------------------------------------------===//

#include "frontend/ImportedPlan.h"

#include "frontend/Frontend.h"
#include "frontend/HuggingFaceConfig.h"
#include "frontend/Models.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include "llvm/Support/Format.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

using namespace plan;
using namespace plan::import;
using llvm::formatv;
using llvm::StringRef;

//===----------------------------------------------------------------------===//
// PlanWriter
//===----------------------------------------------------------------------===//

void PlanWriter::set(StringRef key, std::string value, std::string from) {
  for (Line &line : lines)
    if (line.key == key) {
      line.value = std::move(value);
      line.from = std::move(from);
      return;
    }
  lines.push_back({key.str(), std::move(value), std::move(from)});
}

const std::string *PlanWriter::get(StringRef key) const {
  for (const Line &line : lines)
    if (line.key == key)
      return &line.value;
  return nullptr;
}

void PlanWriter::explain(std::string source, std::string meaning) {
  explained.emplace_back(std::move(source), std::move(meaning));
}

std::string PlanWriter::render() const {
  std::string out;
  for (const std::string &line : header)
    out += line.empty() ? "#\n" : "# " + line + "\n";
  auto item = [&](StringRef indent, StringRef key, const Line &line) {
    std::string text = (indent + key + " = " + line.value).str();
    if (!line.from.empty()) {
      text.resize(std::max<size_t>(text.size() + 2, 36), ' ');
      text += "# " + line.from;
    }
    out += text + "\n";
  };
  // The language's order (docs/language.md), whatever order the config
  // gave the keys in.
  static constexpr StringRef order[] = {
      "model",
      "cluster.nodes",
      "cluster.gpus_per_node",
      "cluster.gpu",
      "cluster.host_memory",
      "train.optimizer",
      "train.micro_batch",
      "train.seq_len",
      "train.grad_accum",
      "train.global_batch",
      "train.precision",
      "train.loss_scale",
      "train.reduce_dtype",
      "train.grad_dtype",
      "train.activation_checkpointing",
      "train.grad_clip",
      "train.lr_schedule",
      "train.steps",
      "parallel.sharding",
      "parallel.mesh",
      "parallel.wrap",
      "parallel.offload.params",
      "parallel.offload.grads",
      "parallel.offload.optimizer",
      "parallel.backward_prefetch",
      "parallel.forward_prefetch",
      "parallel.bucket",
      "parallel.grad_sync",
  };
  std::vector<Line> lines = this->lines;
  llvm::stable_sort(lines, [](const Line &a, const Line &b) {
    return llvm::find(order, a.key) < llvm::find(order, b.key);
  });
  out += "\n";
  for (const Line &line : lines)
    if (!StringRef(line.key).contains('.'))
      item("", line.key, line);
  for (StringRef section : {"cluster", "train", "parallel"}) {
    std::string prefix = (section + ".").str();
    if (llvm::none_of(lines, [&](const Line &line) {
          return StringRef(line.key).starts_with(prefix);
        }))
      continue;
    out += "\n";
    out += section;
    out += " {\n";
    for (const Line &line : lines)
      if (StringRef(line.key).starts_with(prefix))
        item("  ", StringRef(line.key).drop_front(prefix.size()), line);
    out += "}\n";
  }
  if (!explained.empty()) {
    out += "\n# Settings of the config that set no key here:\n";
    for (const auto &[source, meaning] : explained)
      out += "#   " + source + ": " + meaning + "\n";
  }
  return out;
}

//===----------------------------------------------------------------------===//
// ImportContext
//===----------------------------------------------------------------------===//

std::string import::shown(const ConfigMember &member, StringRef prefix) {
  const ConfigNode &value = member.value;
  std::string text = value.kind == ConfigNode::Kind::String ? value.text
                     : value.kind == ConfigNode::Kind::Map  ? "{...}"
                     : value.kind == ConfigNode::Kind::Sequence
                         ? "[...]"
                         : value.describe();
  return (prefix + member.key + ": " + text).str();
}

void ImportContext::checkKeys(const ConfigNode &map, StringRef where,
                              llvm::ArrayRef<StringRef> keys) {
  if (!map.isMap())
    return;
  std::vector<KeyHandler> handlers;
  for (StringRef key : keys)
    handlers.push_back({key, [](const ConfigMember &) {}});
  visit(map, where, handlers);
}

void ImportContext::visit(const ConfigNode &map, StringRef where,
                          llvm::ArrayRef<KeyHandler> handlers) {
  for (const ConfigMember &member : map.members) {
    const KeyHandler *handler = llvm::find_if(
        handlers, [&](const KeyHandler &h) { return h.key == member.key; });
    if (handler != handlers.end()) {
      handler->read(member);
      continue;
    }
    llvm::SmallVector<StringRef> known;
    for (const KeyHandler &h : handlers)
      known.push_back(h.key);
    StringRef close = closestMatch(member.key, known);
    std::string message =
        formatv("unknown key '{0}' in {1}", member.key, where).str();
    std::string listed = "unknown key, left out";
    if (!close.empty()) {
      message += formatv("; did you mean '{0}'?", close).str();
      listed += formatv(" (did you mean {0}?", close).str();
    }
    message += "; it is left out of the plan";
    // A misspelt key usually means its intended one is not given either,
    // and took a default the user did not choose: say which.
    const KeyHandler *meant = llvm::find_if(
        handlers, [&](const KeyHandler &h) { return h.key == close; });
    if (!close.empty() && !meant->whenAbsent.empty() && !map.find(close)) {
      message +=
          formatv(", so '{0}' takes {1}", close, meant->whenAbsent).str();
      listed += formatv(" it takes {0}", meant->whenAbsent).str();
    }
    if (!close.empty())
      listed += ")";
    diag.warning(member.keyLoc, message);
    plan.explain(shown(member), listed);
  }
}

std::optional<int64_t> ImportContext::count(const ConfigMember &member,
                                            int64_t min) {
  return readConfigInteger(member.value, member.key, diag, min, kMaxCount);
}

void ImportContext::unsupported(const ConfigMember &member,
                                const llvm::Twine &why) {
  diag.warning(member.keyLoc, prefix + member.key + ": " + why);
  plan.explain(shown(member), why.str());
}

void ImportContext::noEffect(const ConfigMember &member,
                             const llvm::Twine &why) {
  plan.explain(shown(member), why.str());
}

std::function<void(const ConfigMember &)>
ImportContext::noEffectBecause(std::string why) {
  return [this, why = "no effect: " + why](const ConfigMember &member) {
    noEffect(member, why);
  };
}

void ImportContext::readAccelerateGradAccum(const ConfigMember &member) {
  if (std::optional<int64_t> n = count(member)) {
    accelerateGradAccum = *n;
    plan.set("train.grad_accum", std::to_string(*n), shown(member));
  }
}

void ImportContext::badValue(const ConfigMember &member,
                             const llvm::Twine &expected) {
  diag.error(member.value.loc,
             formatv("'{0}' is {1}; expected {2}", member.key,
                     member.value.describe(), expected.str()));
}

//===----------------------------------------------------------------------===//
// The driver
//===----------------------------------------------------------------------===//

std::string import::planNumber(double value) {
  if (std::abs(value) < 1e15 && value == static_cast<int64_t>(value))
    return std::to_string(static_cast<int64_t>(value));
  // The shortest text that reads back the same double.
  for (int digits = 1; digits < 18; ++digits) {
    std::string text = formatv("{0}", llvm::format("%.*g", digits, value));
    if (std::strtod(text.c_str(), nullptr) == value)
      return text;
  }
  return formatv("{0}", llvm::format("%.17g", value)).str();
}

namespace {

/// --model: a preset, or a config.json / directory. Sets `context.model` and
/// the plan's `model` line.
bool resolveModel(ImportContext &context, std::string &error) {
  const ImportOptions &options = context.options;
  if (options.model.empty()) {
    error = "--model is required: Accelerate and DeepSpeed configs do not "
            "name the model; give a preset (llama3_8b, ...) or the path of an "
            "HF config.json or of its directory";
    return false;
  }
  if (const ModelPreset *preset = lookupModelPreset(options.model)) {
    context.model = preset->spec;
    context.plan.set("model", preset->name.str(), "--model");
    return true;
  }
  std::string path = huggingFaceConfigPath(options.model, "");
  if (!llvm::sys::fs::exists(path)) {
    llvm::SmallVector<StringRef> names;
    for (const ModelPreset &preset : modelPresets())
      names.push_back(preset.name);
    StringRef close = closestMatch(options.model, names);
    error = formatv("--model '{0}' is neither a preset{1} nor an HF "
                    "config.json or a directory holding one",
                    options.model,
                    close.empty() ? std::string()
                                  : " (did you mean '" + close.str() + "'?)")
                .str();
    return false;
  }
  std::string unreadable;
  if (!checkInput(path, unreadable)) {
    error = "--model: " + unreadable;
    return false;
  }
  // Resolved again the same way: from the working directory.
  std::optional<HuggingFaceModel> model = readHuggingFaceModel(
      context.sourceMgr, context.diag, options.model, llvm::SMLoc());
  if (!model)
    return false; // reported at config.json
  context.model = model->spec;

  // The plan names the config relative to where the plan is written when
  // the config lies below that directory, else by its absolute path.
  llvm::SmallString<256> absolute(path), base(options.planDir);
  llvm::sys::fs::make_absolute(absolute);
  llvm::sys::path::remove_dots(absolute, /*remove_dot_dot=*/true);
  llvm::sys::fs::make_absolute(base);
  llvm::sys::path::remove_dots(base, /*remove_dot_dot=*/true);
  std::string shownPath = std::string(absolute);
  StringRef rest = absolute;
  if (rest.consume_front(base) && rest.consume_front("/"))
    shownPath = rest.str();
  std::string escaped;
  for (char c : shownPath) {
    if (c == '"' || c == '\\')
      escaped += '\\';
    escaped += c;
  }
  context.plan.set("model", "hf(\"" + escaped + "\")", "--model");
  return true;
}

/// The cluster: the world size from the options, else the config, the
/// device from --gpu, else the CPU for Accelerate's use_cpu, else h100_sxm.
bool fillCluster(ImportContext &context, std::string &error) {
  const ImportOptions &options = context.options;
  PlanWriter &plan = context.plan;
  if (options.nodes)
    plan.set("cluster.nodes", std::to_string(*options.nodes), "--nodes");
  else if (context.nodes)
    plan.set("cluster.nodes", std::to_string(*context.nodes),
             context.nodesFrom);
  if (options.gpusPerNode)
    plan.set("cluster.gpus_per_node", std::to_string(*options.gpusPerNode),
             "--gpus-per-node");
  else if (context.gpusPerNode)
    plan.set("cluster.gpus_per_node", std::to_string(*context.gpusPerNode),
             context.gpusPerNodeFrom);
  if (!plan.get("cluster.gpus_per_node")) {
    error = "the config does not say how many processes run; give "
            "--gpus-per-node (and --nodes)";
    return false;
  }
  if (!plan.get("cluster.nodes"))
    plan.set("cluster.nodes", "1", "not in the config: one machine");

  if (!options.gpu.empty()) {
    if (!lookupDevice(options.gpu)) {
      llvm::SmallVector<StringRef> names;
      for (const DeviceSpec &device : deviceTable())
        names.push_back(device.name);
      error = formatv("--gpu '{0}' is not a known device; expected one of {1}",
                      options.gpu, llvm::join(names, ", "))
                  .str();
      return false;
    }
    plan.set("cluster.gpu", options.gpu, "--gpu");
  } else if (context.useCpu) {
    plan.set("cluster.gpu", "cpu", "use_cpu: true");
  } else {
    plan.set("cluster.gpu", "h100_sxm",
             "not in the config (--gpu): assumed; check it");
  }
  plan.set("cluster.host_memory",
           options.hostMemory.empty() ? "512GiB" : options.hostMemory,
           options.hostMemory.empty()
               ? "not in the config (--host-memory): assumed; check it"
               : "--host-memory");
  return true;
}

/// The training recipe's keys the script sets: the HF Trainer's defaults
/// unless an option or the config gave them.
void fillTrain(ImportContext &context) {
  const ImportOptions &options = context.options;
  PlanWriter &plan = context.plan;
  if (options.microBatch)
    plan.set("train.micro_batch", std::to_string(*options.microBatch),
             "--micro-batch");
  else if (!plan.get("train.micro_batch"))
    plan.set("train.micro_batch", "8",
             "not in the config (--micro-batch): the HF Trainer's "
             "per_device_train_batch_size");
  int64_t seqLen = std::min<int64_t>(1024, context.model.maxSeqLen);
  if (options.seqLen)
    plan.set("train.seq_len", std::to_string(*options.seqLen), "--seq-len");
  else
    plan.set("train.seq_len", std::to_string(seqLen),
             "not in the config (--seq-len): run_clm.py's block_size, "
             "min(1024, the model's max_seq_len)");
  if (options.gradAccum)
    plan.set("train.grad_accum", std::to_string(*options.gradAccum),
             "--grad-accum");
  if (!plan.get("train.optimizer")) {
    double lr = options.lr.value_or(5e-5);
    plan.set("train.optimizer", "adamw(lr = " + planNumber(lr) + ")",
             options.lr ? "--lr; the HF Trainer's AdamW otherwise"
                        : "not in the config (--lr): the HF Trainer's AdamW "
                          "and learning_rate");
  }
}

} // namespace

std::optional<std::string>
plan::importConfig(llvm::SourceMgr &sourceMgr, DiagEmitter &diag,
                   ImportSource source, StringRef path,
                   const ImportOptions &options, std::string &error) {
  ImportContext context(sourceMgr, diag, options);
  size_t errorsBefore = diag.numErrors();
  if (!resolveModel(context, error))
    return std::nullopt;

  ConfigFormat format = source == ImportSource::DeepSpeed
                            ? ConfigFormat::Json
                            : configFormatOf(path);
  std::optional<ConfigNode> root =
      readConfigDocument(sourceMgr, diag, path, format, error);
  if (!root)
    return std::nullopt;

  StringRef kind =
      source == ImportSource::Accelerate ? "accelerate" : "deepspeed";
  context.plan.headerLine(formatv("Imported by `planc import {0} {1}`.", kind,
                                  llvm::sys::path::filename(path))
                              .str());
  context.plan.headerLine("Each key says where it comes from; the config's "
                          "settings that set no key are listed");
  context.plan.headerLine("at the end. docs/importing.md has the whole "
                          "mapping.");
  if (source == ImportSource::Accelerate)
    importAccelerate(*root, context, path);
  else
    importDeepSpeed(*root, context);
  if (diag.numErrors() != errorsBefore)
    return std::nullopt;
  if (!fillCluster(context, error))
    return std::nullopt;
  fillTrain(context);
  if (diag.numErrors() != errorsBefore)
    return std::nullopt;
  return context.plan.render();
}
