//===- Restore.cpp - Open a checkpoint, check it, restore and reshard -----===//
//
// docs/checkpoints.md ("Resuming", "Resharding"): a checkpoint is opened
// from its checkpoint.json, compared with the schedule that resumes from it,
// and each training-state buffer of this rank is filled from the saved
// tensors that hold its elements, whatever mesh and sharding saved them.
//
//===----------------------------------------------------------------------===//

#include "CheckpointFormat.h"
#include "DTypes.h"
#include "Format.h"
#include "TensorParallel.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstring>
#include <set>

namespace plan::rt {

using namespace checkpoint;

const SafeTensorsFile &Checkpoint::Impl::file(int64_t rank) {
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<SafeTensorsFile> &open = opened[rank];
  if (open)
    return *open;
  for (const FileEntry &f : meta.files) {
    if (f.rank != rank)
      continue;
    verifyFile(f);
    try {
      open = std::make_unique<SafeTensorsFile>(
          support::joinPath(directory, f.file));
    } catch (const WeightsError &e) {
      throw CheckpointError(std::string("checkpoint shard: ") + e.what());
    }
    return *open;
  }
  throw CheckpointError("checkpoint '" + metadataPath +
                        "' lists no file of rank " + std::to_string(rank));
}

void Checkpoint::Impl::verifyFile(const FileEntry &f) const {
  std::string path = support::joinPath(directory, f.file);
  int64_t size = support::fileSize(path);
  if (size < 0)
    throw CheckpointError("checkpoint shard '" + path + "' is missing");
  if (size != f.bytes)
    throw CheckpointError(
        "checkpoint shard '" + path + "' has " + std::to_string(size) +
        " bytes, but " + kMetadataFile + " records " + std::to_string(f.bytes) +
        (size < f.bytes ? " (truncated)" : ""));
  auto [bytes, crc] =
      checkpointFiles([&] { return support::fileSizeAndCrc32(path); });
  if (bytes != f.bytes)
    throw CheckpointError("checkpoint shard '" + path +
                          "' changed while it was read");
  if (crc != f.crc)
    throw CheckpointError("checkpoint shard '" + path + "' has CRC-32 " +
                          hexCrc(crc) + ", but " + kMetadataFile + " records " +
                          hexCrc(f.crc) + " (corrupted)");
}

std::vector<const SavedTensor *>
Checkpoint::Impl::tensorsOf(const std::string &group, BufferRole role,
                            int64_t tensorIndex) const {
  std::vector<const SavedTensor *> out;
  for (const SavedTensor &t : meta.tensors)
    if (t.group == group && t.role == role && t.tensorIndex == tensorIndex)
      out.push_back(&t);
  std::sort(out.begin(), out.end(),
            [](const SavedTensor *a, const SavedTensor *b) {
              return a->shardIndex < b->shardIndex;
            });
  return out;
}

bool Checkpoint::Impl::allOfType(BufferRole role, ElementType type) const {
  for (const SavedTensor &t : meta.tensors)
    if (t.role == role && t.type != type)
      return false;
  return true;
}

bool Checkpoint::Impl::hasRole(BufferRole role) const {
  for (const SavedTensor &t : meta.tensors)
    if (t.role == role)
      return true;
  return false;
}

void Checkpoint::Impl::readUnit(const std::string &unit, BufferRole role,
                                int64_t tensorIndex, int64_t offset,
                                at::Tensor dst) {
  auto place = meta.unitPlace.find(unit);
  if (place == meta.unitPlace.end())
    throw CheckpointError("checkpoint '" + directory +
                          "' holds no state of unit '" + unit + "'");
  const Group &group = meta.groups[place->second.first];
  auto sources = tensorsOf(group.name, role, tensorIndex);
  if (sources.empty())
    throw CheckpointError("checkpoint '" + directory + "' has no " +
                          toString(role) + " of group '" + group.name + "'");
  int64_t begin = place->second.second + offset;
  const int64_t end = begin + dst.numel();
  int64_t written = 0;
  while (begin < end) {
    const SavedTensor *src = nullptr;
    int64_t srcOffset = 0, count = 0;
    if (!sources.front()->sharded) {
      src = sources.front();
      srcOffset = begin;
      count = end - begin;
    } else {
      const int64_t shardNumel = sources.front()->numel;
      int64_t index = shardNumel > 0 ? begin / shardNumel : 0;
      for (const SavedTensor *t : sources)
        if (t->shardIndex == index)
          src = t;
      if (!src || shardNumel <= 0)
        throw CheckpointError("checkpoint '" + directory + "' lacks shard " +
                              std::to_string(index) + " of " + toString(role) +
                              " of group '" + group.name + "'");
      srcOffset = begin - index * shardNumel;
      count = std::min(end - begin, shardNumel - srcOffset);
    }
    if (srcOffset + count > src->numel)
      throw CheckpointError("checkpoint '" + directory + "': tensor '" +
                            src->name + "' is smaller than its group '" +
                            group.name + "'");
    at::Tensor piece;
    try {
      piece = file(src->rank).read(src->name, srcOffset, count);
    } catch (const WeightsError &e) {
      throw CheckpointError(std::string("checkpoint shard: ") + e.what());
    }
    if (piece.scalar_type() != support::scalarType(src->type))
      throw CheckpointError(
          "checkpoint shard '" + file(src->rank).path() + "': tensor '" +
          src->name + "' is " + file(src->rank).dtype(src->name) +
          ", but checkpoint.json records " + toString(src->type));
    dst.narrow(0, written, count).copy_(piece);
    written += count;
    begin += count;
  }
}

at::Tensor Checkpoint::Impl::wholeParam(const Unit &unit, const Param &param,
                                        BufferRole role) {
  const int64_t ranks = param.split ? meta.tensor : 1;
  std::vector<at::Tensor> slices;
  for (int64_t t = 0; t < ranks; ++t) {
    at::Tensor slice = at::empty(param.localShape(meta.tensor), at::kFloat);
    readUnit(unit.name, role, t, param.offset, slice.view({-1}));
    slices.push_back(slice);
  }
  if (!param.split || meta.tensor == 1)
    return slices.front();
  return tp::joinSlices(slices, param.split->dim, param.split->chunks,
                        param.shape[param.split->dim]);
}

Checkpoint::Checkpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Checkpoint::~Checkpoint() = default;
Checkpoint::Checkpoint(Checkpoint &&) noexcept = default;
Checkpoint &Checkpoint::operator=(Checkpoint &&) noexcept = default;

Checkpoint Checkpoint::open(const std::string &directory) {
  auto impl = std::make_unique<Impl>();
  Impl &c = *impl;
  c.directory = directory;
  c.metadataPath = support::joinPath(directory, kMetadataFile);
  if (!support::isDirectory(directory))
    throw CheckpointError("checkpoint '" + directory +
                          "' does not exist or is not a directory");
  if (!support::isRegularFile(c.metadataPath))
    throw CheckpointError("checkpoint '" + directory + "' has no " +
                          kMetadataFile +
                          " (not a checkpoint, or an incomplete save)");
  std::string text =
      checkpointFiles([&] { return support::readFile(c.metadataPath); });
  c.metadataBytes = static_cast<int64_t>(text.size());
  c.meta = parseMetadata(text, c.metadataPath);
  // Existence and size here (cheap: one stat each), so that a missing or
  // truncated shard is one message before any rank starts; the CRC-32 is
  // checked when a file is first read.
  for (const FileEntry &f : c.meta.files) {
    std::string path = support::joinPath(directory, f.file);
    if (!support::isRegularFile(path))
      throw CheckpointError("checkpoint shard '" + path + "' (rank " +
                            std::to_string(f.rank) + ") is missing");
    int64_t size = support::fileSize(path);
    if (size != f.bytes)
      throw CheckpointError(
          "checkpoint shard '" + path + "' has " + std::to_string(size) +
          " bytes, but " + kMetadataFile + " records " +
          std::to_string(f.bytes) + (size < f.bytes ? " (truncated)" : ""));
  }
  return Checkpoint(std::move(impl));
}

const std::string &Checkpoint::directory() const { return impl_->directory; }
const CheckpointInfo &Checkpoint::info() const { return impl_->meta.info; }
const ExecutorCounters &Checkpoint::counters() const {
  return impl_->meta.counters;
}
const ModelConfig &Checkpoint::model() const { return impl_->meta.model; }
const std::vector<Unit> &Checkpoint::units() const { return impl_->meta.units; }
const std::string &Checkpoint::planName() const { return impl_->meta.plan; }
Sharding Checkpoint::sharding() const { return impl_->meta.sharding; }
Precision Checkpoint::precision() const { return impl_->meta.precision; }
int64_t Checkpoint::replicate() const { return impl_->meta.replicate; }
int64_t Checkpoint::shard() const { return impl_->meta.shard; }
int64_t Checkpoint::tensor() const { return impl_->meta.tensor; }
int64_t Checkpoint::pipeline() const { return impl_->meta.pipeline; }
OptimizerKind Checkpoint::optimizer() const { return impl_->meta.optimizer; }

std::vector<CheckpointParam> Checkpoint::params() const {
  std::vector<CheckpointParam> out;
  for (const Unit &u : impl_->meta.units)
    for (const Param &p : u.params)
      if (p.tiedTo.empty() && !p.frozen) // a LoRA base is not saved
        out.push_back({p.name, p.shape});
  return out;
}

int64_t Checkpoint::bytes() const {
  int64_t total = impl_->metadataBytes;
  for (const auto &f : impl_->meta.files)
    total += f.bytes;
  return total;
}

std::vector<CheckpointFile> Checkpoint::files() const {
  std::vector<CheckpointFile> out;
  for (const auto &f : impl_->meta.files)
    out.push_back(
        {f.rank, support::joinPath(impl_->directory, f.file), f.bytes, f.crc});
  return out;
}

void Checkpoint::verify() const {
  for (const auto &f : impl_->meta.files)
    impl_->verifyFile(f);
}

void Checkpoint::checkCompatible(const Schedule &schedule) const {
  const Impl &c = *impl_;
  const ModelConfig &a = c.meta.model, &b = schedule.model;
  auto differ = [&](const std::string &what, const std::string &ours,
                    const std::string &theirs) {
    throw CheckpointError("checkpoint '" + c.directory +
                          "' is of another model: " + what + " is " + theirs +
                          " in the checkpoint but " + ours +
                          " in the schedule");
  };
  auto num = [](int64_t v) { return std::to_string(v); };
  if (a.family != b.family)
    differ("the family", toString(b.family), toString(a.family));
  if (a.vocab != b.vocab)
    differ("vocab", num(b.vocab), num(a.vocab));
  if (a.hidden != b.hidden)
    differ("hidden", num(b.hidden), num(a.hidden));
  if (a.intermediate != b.intermediate)
    differ("intermediate", num(b.intermediate), num(a.intermediate));
  if (a.layers != b.layers)
    differ("layers", num(b.layers), num(a.layers));
  if (a.heads != b.heads)
    differ("heads", num(b.heads), num(a.heads));
  if (a.kvHeads != b.kvHeads)
    differ("kv_heads", num(b.kvHeads), num(a.kvHeads));
  if (a.tieEmbeddings != b.tieEmbeddings)
    differ("tie_embeddings", b.tieEmbeddings ? "true" : "false",
           a.tieEmbeddings ? "true" : "false");
  if (c.meta.units.size() != schedule.units.size())
    differ("the number of units", num(schedule.units.size()),
           num(c.meta.units.size()));
  for (size_t i = 0; i < c.meta.units.size(); ++i) {
    const Unit &u = c.meta.units[i], &v = schedule.units[i];
    std::string at = "unit " + num(static_cast<int64_t>(i));
    if (u.name != v.name)
      differ(at + "'s name", "'" + v.name + "'", "'" + u.name + "'");
    if (u.kind != v.kind)
      differ("unit '" + u.name + "''s kind", toString(v.kind),
             toString(u.kind));
    // A rank's slices differ in size under another tensor degree; the
    // parameters' whole shapes below are what must agree.
    const bool sameTensor = c.meta.tensor == schedule.tensor;
    if (sameTensor && u.numel != v.numel)
      differ("unit '" + u.name + "''s size", num(v.numel), num(u.numel));
    if (u.params.size() != v.params.size())
      differ("unit '" + u.name + "''s parameter count", num(v.params.size()),
             num(u.params.size()));
    for (size_t k = 0; k < u.params.size(); ++k) {
      const Param &p = u.params[k], &q = v.params[k];
      if (p.name != q.name)
        differ("parameter " + num(static_cast<int64_t>(k)) + " of unit '" +
                   u.name + "'",
               "'" + q.name + "'", "'" + p.name + "'");
      if (p.shape != q.shape)
        differ("the shape of '" + p.name + "'", support::shapeString(q.shape),
               support::shapeString(p.shape));
      if (p.tiedTo != q.tiedTo)
        differ("the tie of '" + p.name + "'", "'" + q.tiedTo + "'",
               "'" + p.tiedTo + "'");
      if (p.frozen != q.frozen)
        differ("whether '" + p.name + "' is frozen (a LoRA base)",
               q.frozen ? "frozen" : "trained",
               p.frozen ? "frozen" : "trained");
      if (sameTensor && p.tiedTo.empty() && p.offset != q.offset)
        differ("the offset of '" + p.name + "'", num(q.offset), num(p.offset));
    }
  }
  std::set<BufferRole> needed;
  for (const Program &program : schedule.programs)
    for (const Buffer &buf : program.buffers)
      if (isTrainingState(buf) && buf.role != BufferRole::Param &&
          buf.role != BufferRole::Master)
        needed.insert(buf.role);
  for (BufferRole role : needed)
    if (!c.hasRole(role))
      throw CheckpointError("checkpoint '" + c.directory + "' has no " +
                            toString(role) + " state, which the schedule's " +
                            toString(schedule.train.optimizer.kind) +
                            " optimizer needs (the checkpoint was saved with " +
                            toString(c.meta.optimizer) + ")");
  if (!c.hasRole(BufferRole::Param) && !c.hasRole(BufferRole::Master))
    throw CheckpointError("checkpoint '" + c.directory + "' holds no weights");
}

//===----------------------------------------------------------------------===//
// Restore
//===----------------------------------------------------------------------===//

void Checkpoint::restore(const Schedule &schedule, Executor &executor,
                         Comm &comm) const {
  Impl &c = *impl_;
  checkCompatible(schedule);
  executor.clearState();
  std::map<std::string, const Group *> groups;
  for (const Group &g : schedule.groups)
    groups[g.name] = &g;
  std::map<std::string, int64_t> unitNumel;
  for (const Unit &u : schedule.units)
    unitNumel[u.name] = u.numel;
  const bool hasMaster = c.hasRole(BufferRole::Master),
             hasParam = c.hasRole(BufferRole::Param);
  // Unit `unit`'s stored elements [offset, offset + dst.numel()) on this
  // rank, in `role`: read as saved under the same tensor degree, else from
  // each parameter's whole value (the saving ranks' slices joined) cut to
  // this rank's slice, once per unit and role.
  const int64_t tensorIndex = comm.groupRank(GroupAxis::Tensor);
  std::map<std::pair<std::string, BufferRole>, at::Tensor> resliced;
  auto readUnit = [&](const std::string &unit, BufferRole role, int64_t offset,
                      at::Tensor dst) {
    if (c.meta.tensor == schedule.tensor)
      return c.readUnit(unit, role, tensorIndex, offset, dst);
    at::Tensor &flat = resliced[{unit, role}];
    if (!flat.defined()) {
      const Unit &target =
          *std::find_if(schedule.units.begin(), schedule.units.end(),
                        [&](const Unit &u) { return u.name == unit; });
      const Unit &saved =
          *std::find_if(c.meta.units.begin(), c.meta.units.end(),
                        [&](const Unit &u) { return u.name == unit; });
      flat = at::zeros({target.numel}, at::kFloat);
      for (size_t k = 0; k < target.params.size(); ++k) {
        const Param &p = target.params[k];
        if (!p.tiedTo.empty() || p.frozen)
          continue;
        at::Tensor whole = c.wholeParam(saved, saved.params[k], role);
        if (p.split && schedule.tensor > 1)
          whole = tp::localSlice(whole, p.split->dim, p.split->chunks,
                                 tensorIndex, schedule.tensor);
        flat.narrow(0, p.offset, p.localNumel(schedule.tensor))
            .copy_(whole.reshape({-1}));
      }
    }
    dst.copy_(flat.narrow(0, offset, dst.numel()));
  };

  // This rank's stage's state: by unit, whatever stage saved it.
  const Program &program = schedule.programs.at(
      static_cast<size_t>(comm.groupRank(GroupAxis::Pipeline)));
  for (size_t id = 0; id < program.buffers.size(); ++id) {
    const Buffer &b = program.buffers[id];
    if (!isTrainingState(b))
      continue;
    auto g = groups.find(b.group);
    if (g == groups.end())
      throw CheckpointError("buffer '" + b.name + "' belongs to group '" +
                            b.group + "', which the schedule does not have");
    const Group &group = *g->second;
    int64_t begin = 0, length = group.paddedNumel;
    if (b.sharded) {
      begin = comm.groupRank(GroupAxis::Shard) * group.shardNumel;
      length = group.shardNumel;
    }
    if (b.numel != length || begin + length > group.paddedNumel)
      throw CheckpointError("buffer '" + b.name + "' has " +
                            std::to_string(b.numel) +
                            " elements, but its part of group '" + group.name +
                            "' has " + std::to_string(length));
    // Which saved role fills it: full-precision weights from the master,
    // low-precision params from params of the same dtype (their exact
    // values), else from the master (rounded once, never twice).
    BufferRole source = b.role;
    if (b.role == BufferRole::Master ||
        (b.role == BufferRole::Param && b.type == ElementType::F32))
      source = hasMaster ? BufferRole::Master : BufferRole::Param;
    else if (b.role == BufferRole::Param)
      source =
          (hasParam && c.allOfType(BufferRole::Param, b.type)) || !hasMaster
              ? BufferRole::Param
              : BufferRole::Master;
    at::Tensor target = executor.buffer(static_cast<int64_t>(id));
    at::Tensor staging = at::empty({length}, support::scalarType(b.type));
    staging.zero_();
    // The group's flat vector: its units in order, then zero padding.
    int64_t unitStart = 0;
    for (const std::string &unit : group.units) {
      auto n = unitNumel.find(unit);
      if (n == unitNumel.end())
        throw CheckpointError("group '" + group.name + "' names unit '" + unit +
                              "', which the schedule does not have");
      int64_t from = std::max(begin, unitStart);
      int64_t to = std::min(begin + length, unitStart + n->second);
      if (from < to)
        readUnit(unit, source, from - unitStart,
                 staging.narrow(0, from - begin, to - from));
      unitStart += n->second;
    }
    target.copy_(staging);
  }

  ExecutorCounters counters = c.meta.counters;
  // A schedule without a loss scale ignores the saved one; one with a loss
  // scale restored from a checkpoint without keeps its initial scale.
  ExecutorCounters fresh = executor.counters();
  if (!fresh.lossScale)
    counters.lossScale.reset();
  else if (!counters.lossScale)
    counters.lossScale = fresh.lossScale;
  executor.setCounters(counters);

  if (comm.world() ==
      c.meta.pipeline * c.meta.replicate * c.meta.shard * c.meta.tensor) {
    const SafeTensorsFile &mine = c.file(comm.rank());
    auto it = mine.metadata().find(kRngKey);
    if (it != mine.metadata().end()) {
      auto bytes = fromHex(it->second);
      if (!bytes)
        throw CheckpointError("checkpoint shard '" + mine.path() +
                              "': its RNG state is not hex");
      at::Tensor state = at::empty({static_cast<int64_t>(bytes->size())},
                                   at::TensorOptions().dtype(at::kByte));
      std::memcpy(state.data_ptr(), bytes->data(), bytes->size());
      at::Generator gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      try {
        gen.set_state(state);
      } catch (const std::exception &) {
        throw CheckpointError("checkpoint shard '" + mine.path() +
                              "': its RNG state does not fit this build's "
                              "CPU generator");
      }
    }
  }
}

std::vector<std::pair<std::string, at::Tensor>> Checkpoint::weights() const {
  Impl &c = *impl_;
  BufferRole role =
      c.hasRole(BufferRole::Master) ? BufferRole::Master : BufferRole::Param;
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const Unit &u : c.meta.units) {
    bool stored = false;
    // A LoRA run's frozen base is not in the checkpoint: its weights are
    // the adapters.
    for (const Param &p : u.params)
      stored |= p.tiedTo.empty() && !p.frozen;
    if (!stored)
      continue;
    for (const Param &p : u.params)
      if (p.tiedTo.empty() && !p.frozen)
        out.push_back({p.name, c.wholeParam(u, p, role)});
  }
  return out;
}

} // namespace plan::rt
