//===- PlanOps.td - Operations of the plan dialect ---------*- tablegen -*-===//

#ifndef PLAN_OPS_TD
#define PLAN_OPS_TD

include "dialects/plan/PlanAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/EnumAttr.td"

def Plan_UnitKindAttr : EnumAttr<Plan_Dialect, Plan_UnitKind, "unit_kind">;
def Plan_BaseStorageAttr
    : EnumAttr<Plan_Dialect, Plan_BaseStorage, "base_storage">;

class Plan_Op<string mnemonic, list<Trait> traits = []>
    : Op<Plan_Dialect, mnemonic, traits>;

def Plan_PlanOp : Plan_Op<"plan", [
    Symbol, SymbolTable, NoTerminator, SingleBlock, IsolatedFromAbove,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "A training plan";
  let description = [{
    One training job. `mesh` names the `shard.grid` its ranks form, with
    four axes: pipeline (`pipeline`, the stages the units are divided
    among), replicate, shard (`mesh = (replicate, shard)` in the .plan
    language, the data-parallel ranks) and tensor (`tensor`, the ranks that
    split each block's weights). Its size is the cluster's world size; a
    tensor group is consecutive ranks. The body is empty until
    presets are expanded into `plan.unit`s, which the wrap policy puts into
    `plan.group`s.

    ```mlir
    shard.grid @mesh(shape = 1x1x8x1)
    plan.plan @llama3_8b_fsdp on @mesh
        model #plan.model<family = llama, ...>
        cluster #plan.cluster<nodes = 1, gpus_per_node = 8, ...>
        train #plan.train<...>
        parallel #plan.parallel<sharding = full_shard, ...> {
    }
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    FlatSymbolRefAttr:$mesh,
    Plan_ModelAttr:$model,
    Plan_ClusterAttr:$cluster,
    Plan_TrainAttr:$train,
    Plan_ParallelAttr:$parallel);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    OpBuilder<(ins "::llvm::StringRef":$name, "::llvm::StringRef":$mesh,
                   "ModelAttr":$model, "ClusterAttr":$cluster,
                   "TrainAttr":$train, "ParallelAttr":$parallel)>
  ];
  let extraClassDeclaration = [{
    UnitOp lookupUnit(::llvm::StringRef name);
    GroupOp lookupGroup(::llvm::StringRef name);
    /// The unit holding the parameter `param` ties to, and that parameter;
    /// nulls when it ties nothing or the name resolves to nothing.
    std::pair<UnitOp, ParamOp> lookupTiedTo(ParamOp param);
    /// The mesh this plan runs on.
    ::mlir::shard::GridOp getGridOp();
    /// The size of one axis of the mesh; 0 when the mesh is missing or not
    /// a static 4-axis grid (which the verifier rejects).
    int64_t getMeshSize(MeshAxis axis) {
      return getMeshSize(getGridOp(), axis);
    }
    /// The same of the mesh `grid` (resolved by the caller, as a verifier
    /// does through its symbol tables).
    static int64_t getMeshSize(::mlir::shard::GridOp grid, MeshAxis axis);
    /// The ranks each divided weight is split over: the tensor axis, 1
    /// without one.
    int64_t getTensorRanks() {
      return std::max<int64_t>(getMeshSize(MeshAxis::Tensor), 1);
    }
    int64_t getWorldSize() { return getCluster().getWorldSize(); }
    /// The pipeline's stages (the mesh's pipeline axis, 1 without one).
    int64_t getPipelineRanks() {
      return std::max<int64_t>(getMeshSize(MeshAxis::Pipeline), 1);
    }
    /// The model chunks the units are divided into: a stage per pipeline
    /// rank, or `virtual_stages` per rank under the interleaved schedule.
    int64_t getPipelineChunks() {
      return getPipelineRanks() * getParallel().getVirtualStages();
    }
    /// The pipeline rank that runs model chunk `chunk` (a unit's `stage`):
    /// chunks go round the ranks, `virtual_stages` times.
    int64_t getPipelineRankOfChunk(int64_t chunk) {
      return chunk % getPipelineRanks();
    }
  }];
}

def Plan_UnitOp : Plan_Op<"unit", [
    Symbol, NoTerminator, SingleBlock, HasParent<"PlanOp">]> {
  let summary = "One building block of the model and its parameters";
  let description = [{
    A natural unit of the model (the embeddings, one transformer block, the
    head), in execution order, with its parameters in HuggingFace order.
    Units are computed one at a time; `plan.group`s say which are sharded,
    gathered and freed together.

    Under pipeline parallelism `stage` is the model chunk the unit is in
    (`plan-assign-stages`): chunk `c` runs on pipeline rank `c mod P`, and
    the chunks follow the units' order.

    ```mlir
    plan.unit @layers.0 kind llama_block {
      plan.param "model.layers.0.self_attn.q_proj.weight" : tensor<4096x4096xf32>
      ...
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Plan_UnitKindAttr:$kind,
                       OptionalAttr<I64Attr>:$stage);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `kind` custom<EnumKeyword>($kind) (`stage` $stage^)?
    attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Elements this unit stores that train: its parameters except frozen
    /// ones and those tied to a parameter of another unit (stored once,
    /// where they are defined).
    int64_t getStoredNumel();
    /// Elements of its frozen parameters (a LoRA base), tied ones excluded.
    int64_t getFrozenNumel();
    /// Bytes those take stored as each says (`frozen nf4|bf16|...`).
    int64_t getFrozenBytes();
    /// Whether one of them is stored in NF4 (QLoRA).
    bool hasQuantizedBase();
    /// Its frozen parameters' size in a group's frozen buffer: bytes when
    /// the buffer holds bytes, elements otherwise.
    int64_t getFrozenStorageSize(bool asBytes) {
      return asBytes ? getFrozenBytes() : getFrozenNumel();
    }
    /// The unit storing the parameter this one ties to, and that parameter
    /// (both null when it ties none; a unit ties parameters of one unit).
    std::pair<UnitOp, ParamOp> lookupTiedOwner();
  }];
}

def Plan_GroupOp : Plan_Op<"group", [Symbol, HasParent<"PlanOp">]> {
  let summary = "Units sharded, gathered and freed together (an FSDP unit)";
  let description = [{
    The FlatParameter of FSDP: the stored parameters of `units`, concatenated
    in order into one flat buffer, so one collective moves all of them. The
    wrap policy forms groups (`plan-wrap-units`); `plan-assign-sharding` adds
    `numel` (stored elements that train), `padded_numel` (rounded up to a
    multiple of the shard group size so every rank holds an equal shard) and
    `shard_numel`. Frozen parameters (a LoRA base) are a second flat buffer
    of the group, sized the same way by `frozen_numel`,
    `frozen_padded_numel` and `frozen_shard_numel`; a group of a LoRA run may
    train nothing (`numel = 0`, the embeddings and the head). The frozen
    buffer holds elements of the frozen parameters' one storage type, or,
    when one of them is stored in NF4 (QLoRA), bytes: each parameter in its
    own storage, one after the other; its sizes then count bytes.

    ```mlir
    plan.group @fsdp.root units [@embed, @head] {numel = 65600, padded_numel = 65600, shard_numel = 32800}
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    TypedArrayAttrBase<FlatSymbolRefAttr, "unit symbols">:$units,
    OptionalAttr<I64Attr>:$numel,
    OptionalAttr<I64Attr>:$padded_numel,
    OptionalAttr<I64Attr>:$shard_numel,
    OptionalAttr<I64Attr>:$frozen_numel,
    OptionalAttr<I64Attr>:$frozen_padded_numel,
    OptionalAttr<I64Attr>:$frozen_shard_numel);
  let assemblyFormat = "$sym_name `units` $units attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether its frozen buffer holds bytes (a unit has an NF4 parameter).
    bool storesFrozenAsBytes();
    /// The storage of every frozen parameter of its units, when they share
    /// one and none is NF4: the element type of its frozen buffer.
    std::optional<BaseStorage> getFrozenElementStorage();
  }];
}

def Plan_ParamOp : Plan_Op<"param", [HasParent<"UnitOp">]> {
  let summary = "A parameter tensor with its HuggingFace name";
  let description = [{
    `type` is the full (unsharded) shape with the dtype of the master copy.
    `tied_to` names the parameter whose storage it shares (GPT-2's lm_head
    and wte); a tied parameter is stored once. `frozen` marks a parameter
    that does not train (the base of a LoRA run) and says how it is stored:
    it has no gradient and no optimizer state. A tied parameter is frozen
    when the one it ties to is. `split` says how a mesh with a tensor axis
    above 1 divides it between the ranks of a tensor group (Megatron's
    column-, row- and vocab-parallel layers); a parameter without one is
    whole on every rank, and a tied one is divided as its owner is.

    ```mlir
    plan.param "lm_head.weight" : tensor<50257x768xf32> tied_to "transformer.wte.weight"
    plan.param "model.layers.0.self_attn.q_proj.weight" : tensor<4096x4096xf32> frozen nf4
    plan.param "model.layers.0.self_attn.o_proj.weight" : tensor<4096x4096xf32> split <dim = 1>
    plan.param "transformer.h.0.attn.c_attn.weight" : tensor<768x2304xf32> split <dim = 1, chunks = 3>
    ```
  }];
  let arguments = (ins
    StrAttr:$param_name,
    TypeAttrOf<AnyRankedTensor>:$type,
    OptionalAttr<StrAttr>:$tied_to,
    OptionalAttr<Plan_BaseStorageAttr>:$frozen,
    OptionalAttr<Plan_TensorSplitAttr>:$split);
  let assemblyFormat = [{
    $param_name `:` $type (`tied_to` $tied_to^)?
    (`frozen` custom<EnumKeyword>($frozen)^)? (`split` $split^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    /// The elements one rank holds: its slice of a split parameter on a
    /// tensor axis of `tensorRanks`, padded (TensorSplitAttr), else all.
    int64_t getLocalNumel(int64_t tensorRanks);
  }];
}

#endif // PLAN_OPS_TD
