//===- WorkspaceModel.h - Memory a unit allocates while it runs -*- C++ -*-===//

#ifndef PLAN_PASSES_WORKSPACEMODEL_H
#define PLAN_PASSES_WORKSPACEMODEL_H

#include "dialects/plan/PlanDialect.h"

#include <cstdint>

namespace plan {

/// The shape a unit's workspace depends on: one micro-batch of `microBatch`
/// sequences of `seqLen` tokens, computed in a type of `workingBytes` bytes
/// (4 for fp32, 2 for bf16 and fp16), by a unit of `params` parameter
/// elements (tied ones included).
struct WorkspaceShape {
  int64_t microBatch = 0;
  int64_t seqLen = 0;
  int64_t workingBytes = 4;
  int64_t params = 0;
};

/// The bytes LibTorch allocates outside the arena while a unit's forward (or
/// recompute) runs, at their highest point: the intermediates before they
/// are copied into the saves buffer and freed, the unit's output before it
/// is moved there, and the head's logits and loss temporaries. The unit's
/// input and parameters are in the arena. docs/sched.md ("Workspace
/// model") lists the terms; keep the two in step with runtime/models.
int64_t forwardWorkspaceBytes(UnitKind kind, ModelAttr model,
                              const WorkspaceShape &shape);

/// The same for a unit's backward: the gradients of its activations and of
/// its parameters (autograd returns all of them at once, at the end), the
/// gradient it hands to the unit before included; the gradient it received
/// is counted by the caller (it lives before the backward starts).
int64_t backwardWorkspaceBytes(UnitKind kind, ModelAttr model,
                               const WorkspaceShape &shape);

/// cuBLAS's workspace on the compute stream, which PyTorch allocates through
/// its caching allocator once and keeps: 32 MiB, PyTorch's size on Hopper
/// (8.125 MiB before Hopper; counted as 32 MiB on every GPU).
constexpr int64_t kCublasWorkspaceBytes = int64_t(32) << 20;

} // namespace plan

#endif // PLAN_PASSES_WORKSPACEMODEL_H
