//===- TensorParallelParts.h - A unit's compute split at its collectives --===//
//
// Under tensor parallelism (a mesh whose tensor axis T is above 1) a unit's
// forward, recompute and backward each run in parts: the activation
// collectives of Megatron's layout sit between them, as sched ops on
// explicit buffers (docs/sched.md, "sched-split-tensor-parallel"). This is
// the one definition of where a unit of each role is cut and what crosses
// each cut; the compiler emits the parts and their collectives from it, and
// a runtime computes part `k` of a unit as it says.
//
//   embedding: [0 lookup of this rank's vocabulary slice] LeaveRows
//              [1 the hidden state (GPT-2: + positions)]
//   block:     [0 input norm] EnterColumns [1 attention] LeaveRows
//              [2 residual, second norm] EnterColumns [3 MLP] LeaveRows
//              [4 residual: the block's output]
//   head:      [0 final norm] EnterColumns [1 logits of this rank's
//              vocabulary slice, their statistics] LossStatistics -> loss
//
// Between units the hidden state is handed over as without tensor
// parallelism: the whole sequence on every tensor rank, or under sequence
// parallelism this rank's 1/T of it (consecutive positions, rank order).
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_FORMAT_TENSORPARALLELPARTS_H
#define PLAN_RUNTIME_FORMAT_TENSORPARALLELPARTS_H

#include "Keywords.h"
#include "generated/ScheduleEnums.h"

#include <array>
#include <cstdint>
#include <optional>
#include <span>

namespace plan::rt::tp {

/// What a unit is, as far as its parts go.
enum class UnitRole : uint8_t { Embedding, Block, Head };

/// The role of a unit of `kind` in a model of `family`; none for BERT,
/// which tensor parallelism does not split.
inline std::optional<UnitRole> roleOf(UnitKind kind, ModelFamily family) {
  if (family == ModelFamily::Bert)
    return std::nullopt;
  switch (kind) {
  case UnitKind::Embedding:
    return UnitRole::Embedding;
  case UnitKind::LlamaBlock:
  case UnitKind::GPT2Block:
    return UnitRole::Block;
  case UnitKind::LlamaHead:
  case UnitKind::GPT2Head:
    return UnitRole::Head;
  case UnitKind::BertBlock:
  case UnitKind::BertHead:
    break;
  }
  return std::nullopt;
}

/// A cut between part k and part k + 1 (or, LossStatistics, between the
/// head's last part and the loss).
enum class Boundary : uint8_t {
  /// The input of column-parallel layers (Megatron's f): forward hands the
  /// activation on (sequence parallelism: all-gathers its sequence slices);
  /// backward all-reduces its gradient (SP: reduce-scatters it).
  EnterColumns,
  /// The partial sums of row-parallel layers (Megatron's g): forward
  /// all-reduces them (SP: reduce-scatters them along the sequence);
  /// backward hands the gradient on (SP: all-gathers it).
  LeaveRows,
  /// Each rank's per-token statistics of its vocabulary slice
  /// (kLossStatistics fp32 values a token): forward all-gathers them for
  /// the loss; nothing flows back.
  LossStatistics,
};

/// Per token, of each rank's logits: their maximum, the sum of exp(logit -
/// maximum), and the target's logit (0 where the target is not in the
/// rank's slice).
inline constexpr int64_t kLossStatistics = 3;

/// The cuts of a unit of `role`, in order: the one after part k is
/// `boundaries(role)[k]`.
inline std::span<const Boundary> boundaries(UnitRole role) {
  static constexpr std::array<Boundary, 1> embedding = {Boundary::LeaveRows};
  static constexpr std::array<Boundary, 4> block = {
      Boundary::EnterColumns, Boundary::LeaveRows, Boundary::EnterColumns,
      Boundary::LeaveRows};
  static constexpr std::array<Boundary, 2> head = {Boundary::EnterColumns,
                                                   Boundary::LossStatistics};
  switch (role) {
  case UnitRole::Embedding:
    return embedding;
  case UnitRole::Block:
    return block;
  case UnitRole::Head:
    return head;
  }
  return {};
}

/// The parts of a unit of `role`: one more than its cuts, except the head's,
/// whose last cut leads to the loss.
inline int64_t partCount(UnitRole role) {
  int64_t cuts = static_cast<int64_t>(boundaries(role).size());
  return role == UnitRole::Head ? cuts : cuts + 1;
}

/// What the exchanges of a micro-batch are sized by: `tokens` tokens of
/// `hidden` features, over `tensor` ranks, with or without sequence
/// parallelism.
struct ExchangeShape {
  int64_t tokens = 0, hidden = 0, tensor = 1;
  bool sequenceParallel = false;

  /// Elements of what part k writes into its `out` before the collective
  /// of `cut` (and, in backward, of the gradient it reads back,
  /// `out_grad`): the whole activation, or under sequence parallelism a
  /// rank's slice of the input of column-parallel layers.
  int64_t produced(Boundary cut) const {
    switch (cut) {
    case Boundary::EnterColumns:
      return tokens * hidden / (sequenceParallel ? tensor : 1);
    case Boundary::LeaveRows:
      return tokens * hidden;
    case Boundary::LossStatistics:
      return tokens * kLossStatistics;
    }
    return 0;
  }

  /// Elements of what part k + 1 reads after the collective (`in`; in
  /// backward the gradient it writes, `in_grad`); for LossStatistics, what
  /// the loss reads (every rank's statistics).
  int64_t consumed(Boundary cut) const {
    switch (cut) {
    case Boundary::EnterColumns:
      return tokens * hidden;
    case Boundary::LeaveRows:
      return tokens * hidden / (sequenceParallel ? tensor : 1);
    case Boundary::LossStatistics:
      return tensor * tokens * kLossStatistics;
    }
    return 0;
  }

  /// Elements of one rank's residual stream between units: the hidden
  /// states of every token, or under sequence parallelism of its slice of
  /// the sequence. What a pipeline stage sends to the next one.
  int64_t stream() const {
    return tokens * hidden / (sequenceParallel ? tensor : 1);
  }
};

} // namespace plan::rt::tp

#endif // PLAN_RUNTIME_FORMAT_TENSORPARALLELPARTS_H
