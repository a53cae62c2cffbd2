//===- Schedule.cpp - What the schedule's data says of itself -------------===//

#include "Schedule.h"

namespace plan::rt {

size_t elementBytes(ElementType t) { return t == ElementType::F32 ? 4 : 2; }

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

} // namespace plan::rt
