//===- Passes.td - The plan compiler's passes --------------*- tablegen -*-===//
//
// One pass per file, named for what it does: plan/ on the plan dialect,
// sched/ on the step program. docs/sched.md says what each produces;
// `--plan-lower` runs them all in this order. The sched passes after
// sched-lower run on each sched.program (nested under the module), reading
// the recipe copied onto it.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_PASSES_TD
#define PLAN_PASSES_TD

include "mlir/Pass/PassBase.td"

def PlanExpandPresets : Pass<"plan-expand-presets", "::mlir::ModuleOp"> {
  let summary = "One plan.unit per model block, with its HF-named parameters";
  let description = [{
    Fills each empty plan.plan body with the model's units in execution
    order (embedding, blocks, head) and their parameters (HuggingFace names
    and shapes, fp32), from the model attribute. With a tensor axis above 1
    in the mesh, each parameter tensor parallelism divides carries its
    `split` (Megatron's column-, row- and vocab-parallel layout).
  }];
  let dependentDialects = ["::plan::PlanDialect"];
}

def PlanWrapUnits : Pass<"plan-wrap-units", "::mlir::ModuleOp"> {
  let summary = "Group units into plan.groups (FSDP units) by the wrap policy";
  let dependentDialects = ["::plan::PlanDialect"];
}

def PlanAssignStages : Pass<"plan-assign-stages", "::mlir::ModuleOp"> {
  let summary = "Divide the units among the pipeline's stages";
  let description = [{
    On a mesh whose pipeline axis is above 1, sets each `plan.unit`'s
    `stage` (its model chunk): the plan's `stages` layer counts, or chunks
    balanced by predicted forward FLOPs. Runs after plan-expand-presets and
    before plan-wrap-units, which never groups units of two stages.
  }];
  let dependentDialects = ["::plan::PlanDialect"];
}

def PlanAssignSharding : Pass<"plan-assign-sharding", "::mlir::ModuleOp"> {
  let summary = "Size each group's flat buffer and its shard";
  let dependentDialects = ["::plan::PlanDialect"];
}

def SchedLower : Pass<"sched-lower", "::mlir::ModuleOp"> {
  let summary = "The single-rank program of one step: state, compute, optimizer";
  let options = [
    Option<"rollMicroBatches", "roll-micro-batches", "bool", "false",
           "Without a pipeline and with more than 4 micro-batches, lower "
           "micro-batches 0, 1, 2 and the last only, for "
           "sched-roll-micro-batches to complete (--plan-lower does)">,
    Option<"pipelineTasks", "pipeline-tasks", "bool", "false",
           "Under pipeline parallelism, lower each stage's micro-batch loop "
           "as a sched.tasks: each distinct forward and backward once, the "
           "stage's order as its table, what crosses tasks in slots">
  ];
  let dependentDialects = ["::sched::SchedDialect", "::mlir::memref::MemRefDialect"];
}

def SchedActivationCheckpointing
    : Pass<"sched-activation-checkpointing", "::sched::ProgramOp"> {
  let summary = "Full activation checkpointing: blocks save their input and "
                "recompute before backward";
  let description = [{
    With `train.activation_checkpointing = full`, each transformer block's
    forward saves only its input hidden states; a `sched.recompute` right
    before the block's backward saves its activations again, and both
    buffers are freed after the backward. The unit after a checkpointed
    block keeps its own input. Runs on the single-rank program of
    sched-lower, before sched-insert-collectives; does nothing otherwise.
    On a pipeline stage's sched.tasks (sched-lower's pipeline-tasks) it
    rewrites the bodies: a block's saves slots hold its input, and each
    backward body recomputes into saves of its own.
  }];
  let dependentDialects = ["::sched::SchedDialect"];
}

def SchedInsertCollectives : Pass<"sched-insert-collectives", "::sched::ProgramOp"> {
  let summary = "Shard state and insert gathers and reductions per strategy";
  let dependentDialects = ["::sched::SchedDialect"];
}

def SchedInsertCasts : Pass<"sched-insert-casts", "::sched::ProgramOp"> {
  let summary = "Mixed precision: working copies, master weights, loss scaling";
  let dependentDialects = ["::sched::SchedDialect"];
}

def SchedInsertOffloadCopies : Pass<"sched-insert-offload-copies", "::sched::ProgramOp"> {
  let summary = "Move offloaded state to the host and copy it where it is used";
  let dependentDialects = ["::sched::SchedDialect"];
}

def SchedPrefetch : Pass<"sched-prefetch", "::sched::ProgramOp"> {
  let summary = "Issue all-gathers early, within the in-flight limit";
  let dependentDialects = ["::sched::SchedDialect"];
}

def SchedBucketGradients : Pass<"sched-bucket-gradients", "::sched::ProgramOp"> {
  let summary = "Reduce DDP / zero1 gradients in buckets";
  let dependentDialects = ["::sched::SchedDialect"];
}

def SchedSplitTensorParallel
    : Pass<"sched-split-tensor-parallel", "::sched::ProgramOp"> {
  let summary = "Tensor parallelism: split units at their activation "
                "collectives";
  let description = [{
    On a mesh with a tensor axis above 1: every forward, recompute and
    backward of a unit becomes the parts of its role
    (runtime/format/TensorParallelParts.h), with Megatron's activation
    collectives on the `tensor` group between them over explicit exchange
    buffers (all-reduce; under sequence parallelism all-gather and
    reduce-scatter along the sequence), the loss reads every rank's
    statistics of its vocabulary slice, and the gradient norm and fp16's
    overflow flag are reduced over the tensor group. Under sequence
    parallelism the gradients of parameters held whole are summed over the
    tensor group. Does nothing on other meshes.
  }];
  let dependentDialects = ["::sched::SchedDialect"];
}

def SchedDequantizeBase : Pass<"sched-dequantize-base", "::sched::ProgramOp"> {
  let summary = "Convert a frozen base stored in NF4 or another type for compute";
  let description = [{
    A LoRA run's frozen base may be stored in another type than compute
    reads (`model.base = nf4`: NF4 bytes; `bf16` under `precision = fp32`).
    Before each forward, recompute or backward that reads such a base
    (`frozen`, or a frozen `tied`), converts it with `sched.dequantize`
    into a transient working-type buffer, which the op reads instead and
    which is freed after it; a recompute and the backward right after it
    share one.
  }];
  let dependentDialects = ["::sched::SchedDialect"];
}

def SchedShareSlotBuffers
    : Pass<"sched-share-slot-buffers", "::sched::ProgramOp"> {
  let summary = "Slot buffers that are never in use at once in one allocation";
  let description = [{
    On a pipeline stage's sched.tasks, a one-slot buffer that hands a
    micro-batch's data from one task to a later one (a prefetched gather's
    pool and its staging pool, the slot of a reduction the next task
    completes) is allocated for the whole loop but holds data only from an
    instance's first use to its last (or to the wait of an asynchronous op
    on it). Plays the table, and makes the buffers of one element type,
    memory space and role whose instances are never in use at once views
    at offset 0 of one allocation of the largest size, as the flat step's
    buffers share the arena. Before that, the buffers whose micro-batches a
    run names and a later run names again (each chunk's saves and kept
    input, in as many slots as that chunk ever has in flight) go into one
    pool per kind whose slot each run picks (`picks` of the sched.tasks,
    picked sched.slots), as many slots as the stage holds at once, where
    that takes fewer bytes. sched-verify-schedule proves both
    (plan::RunSlots).
  }];
  let options = [
    Option<"remarkPools", "remark-pools", "bool", /*default=*/"false",
           "Remark at each sched.tasks what picked slots would hold, in how "
           "many slots and bytes against the buffers' own, and whether "
           "they do">,
  ];
  let dependentDialects = ["::sched::SchedDialect"];
}

def SchedRollMicroBatches
    : Pass<"sched-roll-micro-batches", "::sched::ProgramOp"> {
  let summary = "Gradient accumulation's middle micro-batches as one sched.repeat";
  let description = [{
    Completes a program sched-lower lowered with `roll-micro-batches`
    (micro-batches 0, 1, 2 and the last): checks that micro-batches 1 and 2
    are the same ops, one micro-batch apart, and replaces them with a
    sched.repeat of micro-batch 1's ops, `micro_batches - 2` times. Other
    programs are left as they are.
  }];
  let dependentDialects = ["::sched::SchedDialect"];
}

def SchedUnrollTasks : Pass<"sched-unroll-tasks", "::sched::ProgramOp"> {
  let summary = "A sched.tasks' runs written out, in the order of its table";
  let description = [{
    Replaces each sched.tasks of the program by the ops its table runs:
    each entry's body for its micro-batch, a sched.slot as the sched.view of
    the slot that micro-batch takes, a sched.slot_event as the event whose
    sched.slot_signal gave that instance in an earlier run. What the
    schedule file's reader does with a file's tasks, in the IR. Not in the
    plan-lower pipeline.
  }];
  let dependentDialects = ["::sched::SchedDialect"];
}

def SchedVerifySchedule : Pass<"sched-verify-schedule", "::sched::ProgramOp"> {
  let summary = "Reject schedules that deadlock, race or touch dead memory";
  let description = [{
    Walks the step as the compute stream runs it. In the periodic middle of
    a sched.tasks' table, once the walk's state after a period is the state
    before it moved on by the period's micro-batches, the periods left to
    the middle's end are skipped: each would find what the last did.
  }];
  let options = [
    Option<"everyRun", "every-run", "bool", /*default=*/"false",
           "Walk every run of a sched.tasks, stepping over no period of its "
           "table's middle">,
    Option<"remarkRuns", "remark-runs", "bool", /*default=*/"false",
           "Remark at each sched.tasks how many of its runs the walk took "
           "and which it stepped over">,
  ];
  let dependentDialects = ["::sched::SchedDialect"];
}

def SchedVerifyPipeline : Pass<"sched-verify-pipeline", "::mlir::ModuleOp"> {
  let summary = "Prove a pipeline's stage programs match and cannot deadlock";
  let description = [{
    For a plan with a pipeline (one sched.program per stage): every
    sched.send meets its sched.recv on the neighbour at the same position
    (same unit, micro-batch, size and type), every stage issues the same
    collectives on the pipeline group, and playing the programs together
    with rendezvous point-to-point semantics ends with every stage done.
  }];
  let dependentDialects = ["::sched::SchedDialect"];
}

def SchedPlanMemory : Pass<"sched-plan-memory", "::sched::ProgramOp"> {
  let summary = "Place every buffer at an offset in one arena per memory space";
  let description = [{
    Sets each sched.alloc's `offset` (bytes, a multiple of 256) so that
    buffers live at the same time never share memory, and records on each
    sched.program `arena_bytes` and `persistent_bytes`: dictionaries from
    memory space name to the arena's size and to the bytes of its
    persistent buffers. A sched.tasks' bodies share one frame per space;
    the one-slot buffers of the program that only their sched.slots use are
    marked `held` and lie in that frame, where each body's buffers go around
    them only while some run of the body has them in use.
  }];
  let dependentDialects = ["::sched::SchedDialect"];
}

def SchedPlanWorkspace : Pass<"sched-plan-workspace", "::sched::ProgramOp"> {
  let summary = "Predict the memory the runtime allocates outside the arenas";
  let description = [{
    Records on each sched.program `workspace_bytes`: the most bytes LibTorch
    holds outside the arenas at one point of the step, in the memory the
    runtime measures (device memory on a GPU, the process on a CPU device):
    the units' intermediates and gradients before they land in the arena,
    collectives' staging copies until their wait, optimizer temporaries,
    the batch's token ids. `workspace_at` names the op where it is reached.
    The predicted peak is the arenas plus the workspace. The periods of a
    sched.tasks' repeating middle are stepped over once the walk's state
    repeats (plan::PeriodSteps): they would hold what the last one held.
  }];
  let options = [
    Option<"everyRun", "every-run", "bool", /*default=*/"false",
           "Walk every run of a sched.tasks, stepping over no period of its "
           "table's middle">,
  ];
  let dependentDialects = ["::sched::SchedDialect"];
}

#endif // PLAN_PASSES_TD
