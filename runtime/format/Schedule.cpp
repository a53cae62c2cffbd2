//===- Schedule.cpp - What the schedule's data says of itself -------------===//

#include "Schedule.h"

#include "NF4Layout.h"

namespace plan::rt {

size_t elementBytes(ElementType t) {
  switch (t) {
  case ElementType::F32:
    return 4;
  case ElementType::BF16:
  case ElementType::F16:
    return 2;
  case ElementType::I8:
    return 1;
  }
  return 4;
}

std::string shiftMicroBatchInName(std::string_view name, int64_t from,
                                  int64_t to) {
  std::string token = ".mb" + std::to_string(from);
  size_t at = 0;
  while ((at = name.find(token, at)) != std::string_view::npos) {
    size_t after = at + token.size();
    if (after == name.size() || name[after] == '.')
      return std::string(name.substr(0, at)) + ".mb" + std::to_string(to) +
             std::string(name.substr(after));
    at = after;
  }
  return std::string(name);
}

int64_t Param::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t storageBytes(BaseStorage storage, int64_t numel) {
  switch (storage) {
  case BaseStorage::NF4:
    return nf4StorageBytes(numel);
  case BaseStorage::BF16:
  case BaseStorage::F16:
    return 2 * numel;
  case BaseStorage::F32:
    return 4 * numel;
  }
  return 4 * numel;
}

std::vector<int64_t> Param::localShape(int64_t tensor) const {
  std::vector<int64_t> local = shape;
  if (split && tensor > 1 && split->dim >= 0 &&
      split->dim < static_cast<int64_t>(local.size()) && split->chunks > 0)
    local[split->dim] = splitExtent(local[split->dim], split->chunks, tensor);
  return local;
}

int64_t Param::localNumel(int64_t tensor) const {
  int64_t n = 1;
  for (int64_t d : localShape(tensor))
    n *= d;
  return n;
}

std::string meshString(const Schedule &schedule) {
  std::string mesh;
  if (schedule.pipeline != 1) {
    mesh += std::to_string(schedule.pipeline);
    mesh += "x";
  }
  mesh += std::to_string(schedule.replicate);
  mesh += "x";
  mesh += std::to_string(schedule.shard);
  if (schedule.tensor != 1 || schedule.pipeline != 1) {
    mesh += "x";
    mesh += std::to_string(schedule.tensor);
  }
  return mesh;
}

int64_t Schedule::stageOf(const Group &group) const {
  for (const Unit &unit : units)
    if (!group.units.empty() && unit.name == group.units.front())
      return unit.stage;
  return 0;
}

int64_t Schedule::stageOf(const std::string &group) const {
  for (const Group &g : groups)
    if (g.name == group)
      return stageOf(g);
  return 0;
}

int64_t splitExtent(int64_t extent, int64_t chunks, int64_t ranks) {
  int64_t part = extent / chunks;
  return chunks * ((part + ranks - 1) / ranks);
}

bool Unit::hasQuantizedBase() const {
  for (const Param &p : params)
    if (p.frozen && p.tiedTo.empty() && p.base == BaseStorage::NF4)
      return true;
  return false;
}

int64_t Unit::frozenBytes() const {
  int64_t bytes = 0;
  for (const Param &p : params)
    if (p.frozen && p.tiedTo.empty())
      bytes += storageBytes(p.base, p.numel());
  return bytes;
}

int64_t optimizerStateCount(const OptimizerConfig &config) {
  switch (config.kind) {
  case OptimizerKind::AdamW:
    return 2;
  case OptimizerKind::SGD:
    return config.momentum != 0 ? 1 : 0;
  }
  return 0;
}

bool isBlockKind(UnitKind kind) {
  return kind == UnitKind::LlamaBlock || kind == UnitKind::GPT2Block ||
         kind == UnitKind::BertBlock;
}

bool isTrainingStateRole(BufferRole role) {
  switch (role) {
  case BufferRole::Param:
  case BufferRole::Master:
  case BufferRole::ExpAvg:
  case BufferRole::ExpAvgSq:
  case BufferRole::Momentum:
    return true;
  default:
    return false;
  }
}

bool isTrainingState(const Buffer &b) {
  return b.kind == Buffer::Kind::Alloc && b.persistent && !b.group.empty() &&
         isTrainingStateRole(b.role);
}

bool isSavedState(const Schedule &schedule, int64_t stage, const Buffer &b) {
  return isTrainingState(b) && schedule.stageOf(b.group) == stage;
}

} // namespace plan::rt
