//===- Checkpoint.h - Sharded checkpoints: save, resume, reshard, export -*-
// C++ -*-===//
//
// A checkpoint is a directory ROOT/step-NNNNNNNN holding one safetensors file
// per rank (the persistent state buffers that rank owns, under their schedule
// names, plus its RNG state) and checkpoint.json, which describes the layout:
// the model, every group's units and parameters, which rank holds which
// buffer, and each file's size and CRC-32. A save is collective and atomic:
// every rank writes into ROOT/.step-NNNNNNNN.partial (temporary name, fsync,
// rename), rank 0 writes checkpoint.json last and renames the directory into
// place, so a crash at any point leaves the earlier checkpoints intact.
//
// A restore fills each persistent buffer of *any* schedule of the same model
// (other world size, sharding stage, wrapping, precision or offload) from the
// element ranges it needs: the unit order of each group is the common
// coordinate system, so resharding is a copy of ranges, never a gather of the
// whole model. docs/checkpoints.md is the user's description; keep it in step.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_CHECKPOINT_CHECKPOINT_H
#define PLAN_RUNTIME_CHECKPOINT_CHECKPOINT_H

#include "Comm.h"
#include "Executor.h"
#include "Schedule.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace plan::rt {

/// 2: checkpoint.json carries a `checksum` of its own contents. Version 1
/// checkpoints (without one) are still read.
/// 3: `base`, where a LoRA run's frozen base comes from (it is not saved).
/// 4: the mesh's `tensor` axis and each saved tensor's `tensor_index`: a
/// tensor-parallel run's slices (absent in older checkpoints: 1 and 0).
/// 5: the mesh's `pipeline` axis: each stage's ranks save its groups
/// (absent in older checkpoints: 1).
inline constexpr int kCheckpointFormatVersion = 5;

/// A checkpoint that cannot be written or used (missing or truncated shard,
/// bad checksum, malformed metadata, another model): one line that names the
/// file and what is wrong with it.
class CheckpointError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// What a checkpoint records besides the tensors and the executor's counters.
struct CheckpointInfo {
  int64_t step = 0;              // optimizer steps completed; resume at step+1
  uint64_t seed = 0;             // the run's seed (init, synthetic data)
  std::string data;              // the run's --data ("synthetic" or a path)
  int64_t sequencesConsumed = 0; // global sequences read by steps 1..step
  int64_t globalBatch = 0;       // sequences per step when saved
  // A LoRA run's frozen base, which the checkpoint does not hold (only what
  // trains): "seed" (initialised from `seed`), or the absolute path of the
  // --init weights it was loaded from; "" for a full fine-tune.
  std::string base;
};

struct SaveOptions {
  /// Keep the newest `keep` complete checkpoints under the root and delete
  /// older ones (0: keep all). Leftover partial directories of crashed saves
  /// are always deleted.
  int keep = 0;
  /// Test hook (plan-run's PLAN_RUN_FAULT kind=save): called on every rank
  /// with the temporary path of its shard file once written, before it is
  /// renamed.
  std::function<void(const std::string &tmpPath)> afterShardWritten;
};

struct SaveResult {
  std::string directory; // ROOT/step-NNNNNNNN
  int64_t bytes = 0;     // all ranks' files plus checkpoint.json
  double seconds = 0;    // wall time of the save on this rank
};

/// Collective over `comm`'s world: every rank calls it after the same step.
/// Throws CheckpointError on every rank when any rank could not write (that
/// rank's message names the reason, the others name the rank).
SaveResult saveCheckpoint(const std::string &root, const CheckpointInfo &info,
                          const Schedule &schedule, const Executor &executor,
                          Comm &comm, const SaveOptions &options);

/// mkdir -p `root`: plan-run makes the checkpoint root before the run, so
/// that one that cannot be made fails at once, not at the first save. Throws
/// CheckpointError (one line) when it cannot be made or is not a directory.
void makeCheckpointRoot(const std::string &root);

/// The checkpoint directory `path` names: `path` itself when it holds
/// checkpoint.json, else its complete step-NNNNNNNN child with the highest
/// step. nullopt when there is none (or `path` does not exist).
std::optional<std::string> findCheckpoint(const std::string &path);

/// One parameter tensor as the checkpoint's layout describes it.
struct CheckpointParam {
  std::string name;           // HF name
  std::vector<int64_t> shape; // row-major
};

/// One rank's shard file as checkpoint.json records it.
struct CheckpointFile {
  int64_t rank = 0;
  std::string path; // DIR/rank-RRRRR.safetensors
  int64_t bytes = 0;
  uint32_t crc32 = 0;
};

/// An opened checkpoint: checkpoint.json parsed and validated. Shard files
/// are opened (and their size and CRC-32 checked) when first read.
class Checkpoint {
public:
  /// Throws CheckpointError (one line) for a missing or malformed
  /// checkpoint.json or a listed shard file that does not exist.
  static Checkpoint open(const std::string &directory);
  ~Checkpoint();
  Checkpoint(Checkpoint &&) noexcept;
  Checkpoint &operator=(Checkpoint &&) noexcept;

  const std::string &directory() const;
  const CheckpointInfo &info() const;
  const ExecutorCounters &counters() const;
  const ModelConfig &model() const;
  /// The saving schedule's units: parameter names, shapes, layout (a LoRA
  /// run's frozen ones too, which the checkpoint does not hold).
  const std::vector<Unit> &units() const;
  const std::string &planName() const;
  Sharding sharding() const;
  Precision precision() const; // the saving schedule's precision
  int64_t replicate() const;   // the mesh it was saved from
  int64_t shard() const;
  int64_t tensor() const;
  int64_t pipeline() const;
  OptimizerKind optimizer() const;
  /// Every stored (untied) parameter, in unit order then parameter order.
  std::vector<CheckpointParam> params() const;
  /// The sum of the shard files' and checkpoint.json's sizes.
  int64_t bytes() const;
  /// The shard files, by rank.
  std::vector<CheckpointFile> files() const;
  /// Checks every shard file's size and CRC-32 against checkpoint.json;
  /// throws CheckpointError naming the first bad one.
  void verify() const;

  /// Throws CheckpointError naming the first difference when `schedule`'s
  /// model differs from the checkpoint's (family, sizes, parameter names or
  /// shapes), or when it needs optimizer state the checkpoint lacks.
  void checkCompatible(const Schedule &schedule) const;

  /// Fills every persistent buffer of `executor` (this rank of `schedule`,
  /// placed by `comm`) from the checkpoint, resharding when the layout
  /// differs (a tensor-parallel checkpoint's slices are joined and cut
  /// again for another tensor degree), and restores the counters. Weights for
  /// an fp32 master come from the checkpoint's master (else its params),
  /// low-precision params from its params when they have the same dtype (else
  /// its master, rounded); optimizer moments from the same role. Gradients and
  /// other persistent buffers are zeroed. Restores this rank's RNG state when
  /// the checkpoint has the same world size.
  void restore(const Schedule &schedule, Executor &executor, Comm &comm) const;

  /// The model's full weights (fp32 CPU tensors, HF names, tied parameters
  /// excluded), in params() order.
  std::vector<std::pair<std::string, at::Tensor>> weights() const;

private:
  struct Impl;
  explicit Checkpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// What `plan-checkpoint export` writes (docs/checkpoints.md, "Export").
enum class ExportKind {
  Model,   // the model: HF model.safetensors + config.json
  Adapter, // a LoRA run's adapters: PEFT's adapter_model.safetensors +
           // adapter_config.json
  Merged,  // a LoRA run's base with its adapters merged in, as Model
};

/// Writes `outDir`/model.safetensors (the weights in `dtype`: kFloat,
/// kBFloat16 or kHalf) and `outDir`/config.json (HuggingFace's config for the
/// family: LlamaForCausalLM or GPT2LMHeadModel), creating `outDir`. The result
/// loads with `plan-run --init outDir` to the same fp32 weights (bitwise for
/// kFloat) and with transformers' from_pretrained.
/// A LoRA checkpoint holds adapters, not a model: `Adapter` writes them as
/// PEFT saves them (PeftModel.from_pretrained loads them onto the base),
/// `Merged` the base (from the checkpoint's base reference: the seed, or
/// the --init weights) with W + B A alpha/rank in place of each target's
/// weight. Each kind refuses the other kind of checkpoint.
void exportHuggingFace(const Checkpoint &checkpoint, const std::string &outDir,
                       at::ScalarType dtype,
                       ExportKind kind = ExportKind::Model);

} // namespace plan::rt

#endif // PLAN_RUNTIME_CHECKPOINT_CHECKPOINT_H
