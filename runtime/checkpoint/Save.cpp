//===- Save.cpp - A collective, atomic save -------------------------------===//
//
// docs/checkpoints.md ("Saving"): rank 0 prepares a partial directory, every
// rank writes its shard file, rank 0 writes checkpoint.json last and moves
// the directory in place; the ranks agree on every step's outcome, so a
// failed save fails on every rank and leaves the previous checkpoint.
//
//===----------------------------------------------------------------------===//

#include "CheckpointFormat.h"

#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <map>
#include <tuple>

namespace plan::rt {

using namespace checkpoint;
using support::fileSizeAndCrc32;
using support::isDirectory;
using support::isRegularFile;
using support::joinPath;
using support::makeDirectories;
using support::pathExists;
using support::removeTree;
using support::renamePath;
using support::syncPath;
using support::writeFileAtomic;

namespace {

/// World all-reduce (sum) of an int64 CPU tensor; nothing at world 1.
void worldSum(Comm &comm, at::Tensor &values) {
  if (comm.world() <= 1)
    return;
  std::vector<at::Tensor> tensors{values};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  comm.everyone().allreduce(tensors, options)->wait();
}

std::string rngStateHex() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  at::Tensor state;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    state = gen.get_state();
  }
  state = state.contiguous();
  return toHex(state.data_ptr<uint8_t>(), static_cast<size_t>(state.numel()));
}

/// The tensors of this rank's shard file: the saved buffers it owns.
std::vector<std::pair<std::string, at::Tensor>>
ownedTensors(const Schedule &schedule, const Executor &executor, Comm &comm) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  // Each tensor rank saves its own slices (savedTensors).
  const bool firstReplica = comm.groupRank(GroupAxis::Replicate) == 0;
  const bool firstDataRank = comm.groupRank(GroupAxis::World) == 0;
  // Each pipeline stage's ranks hold its program's state.
  const Program &program = schedule.programs.at(
      static_cast<size_t>(comm.groupRank(GroupAxis::Pipeline)));
  for (size_t id = 0; id < program.buffers.size(); ++id) {
    const Buffer &b = program.buffers[id];
    if (!isSavedState(schedule, comm.groupRank(GroupAxis::Pipeline), b))
      continue;
    bool owner = b.sharded ? firstReplica : firstDataRank;
    if (owner)
      out.push_back(
          {b.name, executor.buffer(static_cast<int64_t>(id)).to(at::kCPU)});
  }
  return out;
}

} // namespace

SaveResult saveCheckpoint(const std::string &root, const CheckpointInfo &info,
                          const Schedule &schedule, const Executor &executor,
                          Comm &comm, const SaveOptions &options) {
  auto start = std::chrono::steady_clock::now();
  const int world = comm.world(), rank = comm.rank();
  const std::string name = stepDirName(info.step);
  const std::string partial = joinPath(root, "." + name + ".partial");
  const std::string final = joinPath(root, name);

  // 1. Rank 0 prepares the partial directory; the others wait for it.
  std::string failure;
  if (rank == 0) {
    try {
      makeDirectories(root);
      removeTree(partial);
      makeDirectories(partial);
    } catch (const std::exception &e) {
      failure = e.what();
    }
  }
  at::Tensor prepared = at::zeros({1}, at::kLong);
  prepared[0] = failure.empty() ? 0 : 1;
  worldSum(comm, prepared);
  if (prepared.item<int64_t>() != 0)
    throw CheckpointError(!failure.empty()
                              ? failure
                              : "rank 0 could not create the checkpoint "
                                "directory '" +
                                    partial + "'");

  // 2. Every rank writes its shard file and reports (ok, bytes, crc).
  const std::string file = joinPath(partial, shardFileName(rank));
  int64_t bytes = 0;
  uint32_t crc = 0;
  try {
    std::map<std::string, std::string> metadata{
        {"plan.format", kFormatName},
        {"plan.rank", std::to_string(rank)},
        {"plan.step", std::to_string(info.step)},
        {kRngKey, rngStateHex()}};
    const std::string tmp = file + ".tmp";
    try {
      writeSafeTensors(tmp, ownedTensors(schedule, executor, comm), metadata);
    } catch (const WeightsError &e) {
      throw CheckpointError(e.what());
    }
    syncPath(tmp, false);
    if (options.afterShardWritten)
      options.afterShardWritten(tmp);
    renamePath(tmp, file);
    std::tie(bytes, crc) = fileSizeAndCrc32(file);
  } catch (const std::exception &e) {
    failure = "rank " + std::to_string(rank) +
              " could not write its checkpoint shard: " + e.what();
  }
  at::Tensor results = at::zeros({world, 3}, at::kLong);
  results[rank][0] = failure.empty() ? 1 : 0;
  results[rank][1] = bytes;
  results[rank][2] = static_cast<int64_t>(crc);
  worldSum(comm, results);
  std::vector<std::array<int64_t, 3>> files(static_cast<size_t>(world));
  auto acc = results.accessor<int64_t, 2>();
  for (int r = 0; r < world; ++r)
    files[r] = {acc[r][0], acc[r][1], acc[r][2]};
  for (int r = 0; r < world; ++r)
    if (files[r][0] != 1)
      throw CheckpointError(r == rank ? failure
                                      : "rank " + std::to_string(r) +
                                            " could not write its checkpoint "
                                            "shard into '" +
                                            partial + "'");

  // 3. Rank 0 writes checkpoint.json last and moves the directory in place.
  int64_t total = 0;
  for (const auto &f : files)
    total += f[1];
  if (rank == 0) {
    try {
      std::string text =
          metadataText(info, schedule, executor.counters(), files);
      writeFileAtomic(joinPath(partial, kMetadataFile), text);
      total += static_cast<int64_t>(text.size());
      syncPath(partial, true);
      std::string old = joinPath(root, "." + name + ".old");
      if (pathExists(final)) {
        removeTree(old);
        renamePath(final, old);
      }
      renamePath(partial, final);
      syncPath(root, true);
      prune(root, options.keep);
    } catch (const std::exception &e) {
      failure = e.what();
    }
  }
  at::Tensor committed = at::zeros({2}, at::kLong);
  if (rank == 0) {
    committed[0] = failure.empty() ? 0 : 1;
    committed[1] = total;
  }
  worldSum(comm, committed);
  if (committed[0].item<int64_t>() != 0)
    throw CheckpointError(rank == 0 ? failure
                                    : "rank 0 could not commit the checkpoint "
                                      "'" +
                                          final + "'");
  SaveResult result;
  result.directory = final;
  result.bytes = committed[1].item<int64_t>();
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return result;
}

void makeCheckpointRoot(const std::string &root) {
  checkpointFiles([&] { makeDirectories(root); });
}

std::optional<std::string> findCheckpoint(const std::string &path) {
  if (isRegularFile(joinPath(path, kMetadataFile)))
    return path;
  if (!isDirectory(path))
    return std::nullopt;
  auto complete = completeCheckpoints(path);
  if (complete.empty())
    return std::nullopt;
  return complete.back().second;
}

} // namespace plan::rt
