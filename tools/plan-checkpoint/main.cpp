//===- main.cpp - plan-checkpoint: inspect, verify and export checkpoints -===//
//
//   plan-checkpoint info PATH
//   plan-checkpoint verify PATH
//   plan-checkpoint export PATH -o OUTDIR [--dtype fp32|bf16|fp16]
//                          [--adapter | --merged]   (a LoRA run's)
//
// PATH is a checkpoint directory (step-NNNNNNNN) or a checkpoint root, which
// means its newest complete checkpoint. docs/checkpoints.md describes them.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "Format.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>

using namespace plan::rt;
using plan::rt::support::formatBytes;

namespace {

Checkpoint openPath(const std::string &path) {
  auto dir = findCheckpoint(path);
  if (!dir)
    throw CheckpointError("no checkpoint at '" + path +
                          "' (neither a checkpoint directory nor a root "
                          "holding a complete step-NNNNNNNN)");
  return Checkpoint::open(*dir);
}

void printInfo(const Checkpoint &c) {
  const ModelConfig &m = c.model();
  const CheckpointInfo &info = c.info();
  const ExecutorCounters &counters = c.counters();
  std::printf("checkpoint: %s\n", c.directory().c_str());
  std::printf("step:       %lld\n", static_cast<long long>(info.step));
  std::printf("plan:       %s\n", c.planName().c_str());
  std::printf("model:      %s%s%s (vocab %lld, hidden %lld, intermediate "
              "%lld, layers %lld, heads %lld, kv_heads %lld)\n",
              toString(m.family), m.preset.empty() ? "" : " ", m.preset.c_str(),
              static_cast<long long>(m.vocab), static_cast<long long>(m.hidden),
              static_cast<long long>(m.intermediate),
              static_cast<long long>(m.layers), static_cast<long long>(m.heads),
              static_cast<long long>(m.kvHeads));
  if (c.pipeline() > 1)
    std::printf("mesh:       %lldx%lldx%lldx%lld (pipeline x replicate x "
                "shard x tensor)\n",
                static_cast<long long>(c.pipeline()),
                static_cast<long long>(c.replicate()),
                static_cast<long long>(c.shard()),
                static_cast<long long>(c.tensor()));
  else if (c.tensor() > 1)
    std::printf("mesh:       %lldx%lldx%lld (replicate x shard x tensor)\n",
                static_cast<long long>(c.replicate()),
                static_cast<long long>(c.shard()),
                static_cast<long long>(c.tensor()));
  else
    std::printf("mesh:       %lldx%lld (replicate x shard)\n",
                static_cast<long long>(c.replicate()),
                static_cast<long long>(c.shard()));
  std::printf("sharding:   %s\n", toString(c.sharding()));
  std::printf("precision:  %s\n", toString(c.precision()));
  std::printf("optimizer:  %s\n", toString(c.optimizer()));
  std::printf("data:       %s (seed %llu, %lld sequences consumed, global "
              "batch %lld)\n",
              info.data.c_str(), static_cast<unsigned long long>(info.seed),
              static_cast<long long>(info.sequencesConsumed),
              static_cast<long long>(info.globalBatch));
  std::printf("counters:   optimizer_steps %lld, loss_scale ",
              static_cast<long long>(counters.optimizerSteps));
  if (counters.lossScale)
    std::printf("%g", *counters.lossScale);
  else
    std::printf("none");
  std::printf(", growth_tracker %lld\n",
              static_cast<long long>(counters.growthTracker));
  size_t params = c.params().size();
  std::printf("parameters: %zu tensors\n", params);
  std::printf("files:\n");
  for (const CheckpointFile &f : c.files())
    std::printf("  rank %lld  %s  %lld bytes  crc32 %08x\n",
                static_cast<long long>(f.rank), f.path.c_str(),
                static_cast<long long>(f.bytes), f.crc32);
  std::printf("total:      %s\n", formatBytes(c.bytes()).c_str());
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"Inspect, verify and export plan-run checkpoints "
               "(docs/checkpoints.md)",
               "plan-checkpoint"};
  app.require_subcommand(1);

  std::string infoPath, verifyPath, exportPath, outDir, dtype = "fp32";
  auto *info = app.add_subcommand(
      "info", "Print a checkpoint's step, plan, model, mesh, sharding, "
              "optimizer, counters and files");
  info->add_option("PATH", infoPath,
                   "checkpoint directory, or a root (its newest checkpoint)")
      ->required();
  auto *verify = app.add_subcommand(
      "verify", "Check every shard file's size and CRC-32 against "
                "checkpoint.json");
  verify
      ->add_option("PATH", verifyPath,
                   "checkpoint directory, or a root (its newest checkpoint)")
      ->required();
  auto *exp = app.add_subcommand(
      "export", "Write consolidated HuggingFace weights (model.safetensors) "
                "and config.json");
  exp->add_option("PATH", exportPath,
                  "checkpoint directory, or a root (its newest checkpoint)")
      ->required();
  exp->add_option("-o,--output", outDir, "output directory (created)")
      ->required();
  exp->add_option("--dtype", dtype, "dtype of the exported weights")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  bool adapter = false, merged = false;
  auto *adapterFlag =
      exp->add_flag("--adapter", adapter,
                    "A LoRA run's adapters as HF PEFT saves them "
                    "(adapter_model.safetensors, adapter_config.json)");
  exp->add_flag("--merged", merged,
                "A LoRA run's model with its adapters merged into the base "
                "(model.safetensors, config.json)")
      ->excludes(adapterFlag);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    // One line with the tool's name and exit code 1 (docs/checkpoints.md),
    // not CLI11's own codes (105, 106, ...).
    std::fprintf(stderr, "plan-checkpoint: %s (see --help)\n",
                 support::oneLine(e.what()).c_str());
    return 1;
  }

  try {
    if (*info) {
      printInfo(openPath(infoPath));
    } else if (*verify) {
      Checkpoint c = openPath(verifyPath);
      c.verify();
      std::printf("plan-checkpoint: %s: %zu files, %s, all sizes and CRC-32 "
                  "match\n",
                  c.directory().c_str(), c.files().size(),
                  formatBytes(c.bytes()).c_str());
    } else if (*exp) {
      Checkpoint c = openPath(exportPath);
      at::ScalarType type = dtype == "bf16"   ? at::kBFloat16
                            : dtype == "fp16" ? at::kHalf
                                              : at::kFloat;
      ExportKind kind = adapter  ? ExportKind::Adapter
                        : merged ? ExportKind::Merged
                                 : ExportKind::Model;
      exportHuggingFace(c, outDir, type, kind);
      std::printf("plan-checkpoint: exported step %lld of %s to %s "
                  "(%s; %s)\n",
                  static_cast<long long>(c.info().step), c.directory().c_str(),
                  outDir.c_str(),
                  adapter  ? "adapter_model.safetensors, adapter_config.json"
                  : merged ? "model.safetensors with the adapters merged, "
                             "config.json"
                           : "model.safetensors, config.json",
                  dtype.c_str());
    }
  } catch (const std::exception &e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    std::fflush(stdout);
    std::fprintf(stderr, "plan-checkpoint: %s\n", what.c_str());
    return 1;
  }
  return 0;
}
