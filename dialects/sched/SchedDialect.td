//===- SchedDialect.td - The sched dialect -----------------*- tablegen -*-===//

#ifndef SCHED_DIALECT_TD
#define SCHED_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Sched_Dialect : Dialect {
  let name = "sched";
  let cppNamespace = "::sched";
  let summary = "The per-rank program of one training step";
  let description = [{
    One SPMD program, parameterised by the rank's position in the mesh, that
    every rank runs for one training step: flat buffers in a memory space,
    collectives on the mesh's process groups, precision casts, host<->device
    copies, compute of one model unit for one micro-batch, and the optimizer
    step on a shard. Asynchronous ops (collectives, copies) return a
    `!sched.event`; the compute stream waits for it with `sched.wait`.
    docs/sched.md describes the semantics the runtime implements.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::plan::PlanDialect", "::mlir::memref::MemRefDialect"];
  let extraClassDeclaration = [{
    void registerOps();
  }];
}

//===----------------------------------------------------------------------===//
// Enumerations
//===----------------------------------------------------------------------===//

class Sched_Enum<string name, string summary, list<I32EnumAttrCase> cases>
    : I32EnumAttr<name, summary, cases> {
  let cppNamespace = "::sched";
  let genSpecializedAttr = 0;
}

def Sched_MemorySpace : Sched_Enum<"MemorySpace", "where a buffer lives", [
  I32EnumAttrCase<"Device", 0, "device">,
  I32EnumAttrCase<"Host", 1, "host">,
  I32EnumAttrCase<"PinnedHost", 2, "pinned_host">]>;

// `#sched.space<device>`: the angle brackets make it parseable where it
// stands alone, as a memref's memory space.
def Sched_MemorySpaceAttr
    : EnumAttr<Sched_Dialect, Sched_MemorySpace, "space"> {
  let assemblyFormat = "`<` $value `>`";
}

def Sched_Group : Sched_Enum<"Group", "process group of the mesh", [
  // Axis 1 of the mesh: the ranks that share one copy of the sharded state.
  I32EnumAttrCase<"Shard", 0, "shard">,
  // Axis 0: the ranks that hold the same shard (hybrid_shard's replicas).
  I32EnumAttrCase<"Replicate", 1, "replicate">,
  // Both data-parallel axes: every rank when the mesh has no tensor axis,
  // else the ranks that hold the same tensor slice.
  I32EnumAttrCase<"World", 2, "world">,
  // Axis 2: the ranks that divide each weight among them (tensor
  // parallelism): consecutive ranks.
  I32EnumAttrCase<"Tensor", 3, "tensor">,
  // The outermost axis: the stages of one pipeline, which sched.send and
  // sched.recv connect.
  I32EnumAttrCase<"Pipeline", 4, "pipeline">,
  // The pipeline's first and last stages (Megatron's embedding group): the
  // two ranks of a pipeline group that hold the input embedding and the
  // head tied to it, which add the gradients of that shared weight. No
  // rank of a stage between them is in one.
  I32EnumAttrCase<"Embedding", 5, "embedding">]>;

def Sched_GroupAttr : EnumAttr<Sched_Dialect, Sched_Group, "group"> {
}

// The neighbour in the pipeline group a sched.send or sched.recv talks to:
// the stage after this one (pipeline rank + 1, wrapping from the last rank
// to the first between the chunks of the interleaved schedule) or before it.
def Sched_Peer : Sched_Enum<"Peer", "pipeline neighbour", [
  I32EnumAttrCase<"Next", 0, "next">,
  I32EnumAttrCase<"Prev", 1, "prev">]>;

def Sched_PeerAttr : EnumAttr<Sched_Dialect, Sched_Peer, "peer"> {
}

def Sched_ReduceOp : Sched_Enum<"ReduceOp", "reduction", [
  I32EnumAttrCase<"Sum", 0, "sum">,
  I32EnumAttrCase<"Avg", 1, "avg">,
  I32EnumAttrCase<"Max", 2, "max">]>;

def Sched_ReduceOpAttr : EnumAttr<Sched_Dialect, Sched_ReduceOp, "reduce"> {
}

def Sched_BufferRole : Sched_Enum<"BufferRole", "what a buffer holds", [
  I32EnumAttrCase<"Param", 0, "param">,              // working parameters (a shard, or full)
  I32EnumAttrCase<"Master", 1, "master">,            // fp32 master weights owned by the optimizer
  I32EnumAttrCase<"Grad", 2, "grad">,                // gradients kept across micro-batches (shard or full)
  I32EnumAttrCase<"ExpAvg", 3, "exp_avg">,           // AdamW first moment
  I32EnumAttrCase<"ExpAvgSq", 4, "exp_avg_sq">,      // AdamW second moment
  I32EnumAttrCase<"Momentum", 5, "momentum">,        // SGD momentum
  I32EnumAttrCase<"Gathered", 6, "gathered">,        // all-gathered full parameters
  I32EnumAttrCase<"UnshardedGrad", 7, "unsharded_grad">, // full gradients before reduction
  I32EnumAttrCase<"Activations", 8, "activations">,  // saved for backward
  I32EnumAttrCase<"Bucket", 9, "bucket">,            // gradient reduction bucket
  I32EnumAttrCase<"Staging", 10, "staging">,         // a copy in another memory space or dtype
  I32EnumAttrCase<"Scalar", 11, "scalar">,           // a norm, a found-inf flag
  I32EnumAttrCase<"LossScale", 12, "loss_scale">,    // fp16's loss scale (persistent)
  I32EnumAttrCase<"Frozen", 13, "frozen">,           // weights that do not train (a LoRA base)
  I32EnumAttrCase<"Exchange", 14, "exchange">]>;     // an activation or its gradient between two parts of a unit (tensor parallelism) or two pipeline stages

def Sched_BufferRoleAttr : EnumAttr<Sched_Dialect, Sched_BufferRole, "role"> {
}

def Sched_OptimizerPlace : Sched_Enum<"StepPlace", "where the optimizer runs", [
  I32EnumAttrCase<"Device", 0, "device">,
  I32EnumAttrCase<"Host", 1, "host">]>;

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

class Sched_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Sched_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Sched_EventType : Sched_Type<"Event", "event"> {
  let summary = "Completion of an asynchronous op (a CUDA event)";
}

#endif // SCHED_DIALECT_TD
