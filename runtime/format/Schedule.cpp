//===- Schedule.cpp - Keyword spellings of the schedule enums -------------===//

#include "Schedule.h"

#include <type_traits>

namespace plan::rt {

const char *toString(Space s) {
  switch (s) {
  case Space::Device:
    return "device";
  case Space::Host:
    return "host";
  case Space::PinnedHost:
    return "pinned_host";
  }
  return "?";
}

const char *toString(ElementType t) {
  switch (t) {
  case ElementType::F32:
    return "f32";
  case ElementType::BF16:
    return "bf16";
  case ElementType::F16:
    return "f16";
  }
  return "?";
}

const char *toString(GroupAxis a) {
  switch (a) {
  case GroupAxis::Shard:
    return "shard";
  case GroupAxis::Replicate:
    return "replicate";
  case GroupAxis::World:
    return "world";
  }
  return "?";
}

const char *toString(ReduceKind r) {
  switch (r) {
  case ReduceKind::Sum:
    return "sum";
  case ReduceKind::Avg:
    return "avg";
  case ReduceKind::Max:
    return "max";
  }
  return "?";
}

const char *toString(BufferRole r) {
  switch (r) {
  case BufferRole::Param:
    return "param";
  case BufferRole::Master:
    return "master";
  case BufferRole::Grad:
    return "grad";
  case BufferRole::ExpAvg:
    return "exp_avg";
  case BufferRole::ExpAvgSq:
    return "exp_avg_sq";
  case BufferRole::Momentum:
    return "momentum";
  case BufferRole::Gathered:
    return "gathered";
  case BufferRole::UnshardedGrad:
    return "unsharded_grad";
  case BufferRole::Activations:
    return "activations";
  case BufferRole::Bucket:
    return "bucket";
  case BufferRole::Staging:
    return "staging";
  case BufferRole::Scalar:
    return "scalar";
  }
  return "?";
}

const char *toString(OpKind k) {
  switch (k) {
  case OpKind::Alloc:
    return "alloc";
  case OpKind::Free:
    return "free";
  case OpKind::Wait:
    return "wait";
  case OpKind::AllGather:
    return "all_gather";
  case OpKind::ReduceScatter:
    return "reduce_scatter";
  case OpKind::AllReduce:
    return "all_reduce";
  case OpKind::Broadcast:
    return "broadcast";
  case OpKind::Copy:
    return "copy";
  case OpKind::Cast:
    return "cast";
  case OpKind::Zero:
    return "zero";
  case OpKind::Accumulate:
    return "accumulate";
  case OpKind::Forward:
    return "forward";
  case OpKind::Recompute:
    return "recompute";
  case OpKind::Loss:
    return "loss";
  case OpKind::Backward:
    return "backward";
  case OpKind::GradNorm:
    return "grad_norm";
  case OpKind::CheckFinite:
    return "check_finite";
  case OpKind::OptimizerStep:
    return "optimizer_step";
  case OpKind::UpdateLossScale:
    return "update_loss_scale";
  }
  return "?";
}

const char *toString(Buffer::Kind k) {
  switch (k) {
  case Buffer::Kind::Alloc:
    return "alloc";
  case Buffer::Kind::View:
    return "view";
  case Buffer::Kind::ShardView:
    return "shard_view";
  }
  return "?";
}

size_t elementBytes(ElementType t) { return t == ElementType::F32 ? 4 : 2; }

// Enumerators are dense from 0 to `last`, so the inverse is a scan over
// toString: one spelling per keyword, defined in one place.
template <typename Enum>
static std::optional<Enum> parseKeyword(std::string_view keyword, Enum last) {
  using Underlying = std::underlying_type_t<Enum>;
  for (unsigned i = 0; i <= static_cast<unsigned>(last); ++i) {
    Enum value = static_cast<Enum>(static_cast<Underlying>(i));
    if (keyword == toString(value))
      return value;
  }
  return std::nullopt;
}

std::optional<Space> parseSpace(std::string_view keyword) {
  return parseKeyword(keyword, Space::PinnedHost);
}
std::optional<ElementType> parseElementType(std::string_view keyword) {
  return parseKeyword(keyword, ElementType::F16);
}
std::optional<GroupAxis> parseGroupAxis(std::string_view keyword) {
  return parseKeyword(keyword, GroupAxis::World);
}
std::optional<ReduceKind> parseReduceKind(std::string_view keyword) {
  return parseKeyword(keyword, ReduceKind::Max);
}
std::optional<BufferRole> parseBufferRole(std::string_view keyword) {
  return parseKeyword(keyword, BufferRole::Scalar);
}
std::optional<OpKind> parseOpKind(std::string_view keyword) {
  return parseKeyword(keyword, OpKind::UpdateLossScale);
}
std::optional<Buffer::Kind> parseBufferKind(std::string_view keyword) {
  return parseKeyword(keyword, Buffer::Kind::ShardView);
}

} // namespace plan::rt
