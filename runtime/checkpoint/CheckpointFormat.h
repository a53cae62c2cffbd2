//===- CheckpointFormat.h - A checkpoint's files (internal) -----*- C++ -*-===//
//
// What the parts of the checkpoint library share (docs/checkpoints.md): the
// directory layout, which tensors a checkpoint holds and where, the form of
// checkpoint.json (Metadata.cpp), and an opened checkpoint (Checkpoint::Impl,
// read by Restore.cpp and HuggingFace.cpp). Not installed.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_CHECKPOINT_CHECKPOINTFORMAT_H
#define PLAN_RUNTIME_CHECKPOINT_CHECKPOINTFORMAT_H

#include "Checkpoint.h"
#include "Files.h"
#include "Json.h"
#include "SafeTensors.h"

#include <array>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace plan::rt::checkpoint {

inline constexpr const char *kFormatName = "plan-checkpoint";
inline constexpr const char *kMetadataFile = "checkpoint.json";
inline constexpr const char *kRngKey = "plan.rng_state";

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

/// "step-00000042".
std::string stepDirName(int64_t step);
/// "rank-00003.safetensors".
std::string shardFileName(int64_t rank);
/// The complete checkpoints under `root` (step directories holding
/// checkpoint.json), by step.
std::vector<std::pair<int64_t, std::string>>
completeCheckpoints(const std::string &root);
/// Deletes leftovers of interrupted saves (.step-*.partial, .step-*.old) and,
/// with keep > 0, all but the `keep` newest complete checkpoints.
void prune(const std::string &root, int keep);

std::string toHex(const uint8_t *data, size_t size);
std::optional<std::vector<uint8_t>> fromHex(const std::string &text);
std::string hexCrc(uint32_t crc);

/// Runs `fn`, turning a file system error into a CheckpointError.
template <typename Fn> auto checkpointFiles(Fn &&fn) {
  try {
    return fn();
  } catch (const support::FileError &e) {
    throw CheckpointError(e.what());
  }
}

//===----------------------------------------------------------------------===//
// What a checkpoint holds
//===----------------------------------------------------------------------===//

/// One saved tensor: a training-state buffer (isTrainingState), or its
/// shard, of one tensor rank. A sharded buffer is saved by the ranks of
/// replicate index 0, an unsharded one by the ranks of data-parallel index
/// 0, each tensor rank its own slices: each element once.
struct SavedTensor {
  std::string name;
  BufferRole role = BufferRole::Param;
  std::string group;
  ElementType type = ElementType::F32;
  int64_t numel = 0;
  bool sharded = false;
  int64_t shardIndex = 0;
  int64_t tensorIndex = 0;
  int64_t rank = 0;
};

std::vector<SavedTensor> savedTensors(const Schedule &schedule);

/// One rank's shard file as checkpoint.json records it.
struct FileEntry {
  int64_t rank = 0;
  std::string file; // name within the directory
  int64_t bytes = 0;
  uint32_t crc = 0;
};

/// checkpoint.json, read.
struct Metadata {
  CheckpointInfo info;
  ExecutorCounters counters;
  ModelConfig model;
  std::string plan;
  Precision precision = Precision::FP32;
  Sharding sharding = Sharding::NoShard;
  OptimizerKind optimizer = OptimizerKind::AdamW;
  double momentum = 0; // sgd's
  int64_t pipeline = 1, replicate = 1, shard = 1, tensor = 1;
  std::vector<Unit> units;
  std::vector<Group> groups;
  std::vector<SavedTensor> tensors;
  std::vector<FileEntry> files;
  // unit name -> (group index, element offset of the unit in the group)
  std::map<std::string, std::pair<size_t, int64_t>> unitPlace;
};

/// checkpoint.json's text for a save of `schedule` at `info` whose ranks
/// wrote `files` (per rank: ok, bytes, CRC-32).
std::string metadataText(const CheckpointInfo &info, const Schedule &schedule,
                         const ExecutorCounters &counters,
                         const std::vector<std::array<int64_t, 3>> &files);
/// Reads and checks checkpoint.json (`text`, read from `path`); throws
/// CheckpointError naming the key.
Metadata parseMetadata(const std::string &text, const std::string &path);

} // namespace plan::rt::checkpoint

namespace plan::rt {

/// An opened checkpoint: its metadata and, once first read, its shard files
/// (checked against their size and CRC-32 then).
struct Checkpoint::Impl {
  std::string directory;
  std::string metadataPath;
  int64_t metadataBytes = 0;
  checkpoint::Metadata meta;
  std::map<int64_t, std::unique_ptr<SafeTensorsFile>> opened; // by rank
  std::mutex mutex;                                           // guards `opened`

  const SafeTensorsFile &file(int64_t rank);
  void verifyFile(const checkpoint::FileEntry &f) const;
  /// The saved tensors of `group` in `role` of tensor rank `tensorIndex`,
  /// by shard index.
  std::vector<const checkpoint::SavedTensor *>
  tensorsOf(const std::string &group, BufferRole role,
            int64_t tensorIndex) const;
  /// Whether every saved tensor of `role` has element type `type`.
  bool allOfType(BufferRole role, ElementType type) const;
  bool hasRole(BufferRole role) const;
  /// Copies elements [offset, offset + dst.numel()) of unit `unit`'s stored
  /// elements in `role` on tensor rank `tensorIndex` into `dst` (converting
  /// the dtype).
  void readUnit(const std::string &unit, BufferRole role, int64_t tensorIndex,
                int64_t offset, at::Tensor dst);
  /// The whole (HF-shaped) fp32 value of the checkpoint's stored parameter
  /// `param` of unit `unit` in `role`: its tensor ranks' slices joined.
  at::Tensor wholeParam(const Unit &unit, const Param &param, BufferRole role);
};

} // namespace plan::rt

#endif // PLAN_RUNTIME_CHECKPOINT_CHECKPOINTFORMAT_H
