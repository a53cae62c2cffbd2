//===- SchedOps.td - Operations of the sched dialect -------*- tablegen -*-===//

#ifndef SCHED_OPS_TD
#define SCHED_OPS_TD

include "dialects/sched/SchedDialect.td"
include "dialects/sched/SchedContract.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// A flat buffer: a static 1-D memref of floats in a #sched.space, or of
// bytes (i8: a frozen base stored in NF4, which only sched.dequantize reads).
def Sched_Buffer : Type<
    And<[MemRefRankOf<[AnyFloat, I8], [1]>.predicate,
         CPred<"::llvm::cast<::mlir::MemRefType>($_self).hasStaticShape()">,
         CPred<"::llvm::isa_and_nonnull<::sched::MemorySpaceAttr>("
               "::llvm::cast<::mlir::MemRefType>($_self).getMemorySpace())">]>,
    "flat buffer (static 1-D float or i8 memref in a #sched.space)",
    "::mlir::MemRefType">;

// A one-element fp32 buffer: a norm, a found-inf flag, the loss scale.
def Sched_Scalar : Type<
    And<[Sched_Buffer.predicate,
         CPred<"::llvm::cast<::mlir::MemRefType>($_self).getNumElements() == 1">,
         CPred<"::llvm::cast<::mlir::MemRefType>($_self).getElementType().isF32()">]>,
    "one-element f32 buffer", "::mlir::MemRefType">;

class Sched_Op<string mnemonic, list<Trait> traits = []>
    : Op<Sched_Dialect, mnemonic, traits> {
  // What a schedule file reader checks of the op beyond its ids, lifetimes
  // and events (SchedContract.td).
  list<Sched_FileCheck> fileChecks = [];
  // Whether the op is an instruction of the schedule file (plan-tblgen's
  // op table); 0 for the ops the file holds as tables (a task's slots).
  bit isInstruction = 1;
}

//===----------------------------------------------------------------------===//
// Program
//===----------------------------------------------------------------------===//

def Sched_ProgramOp : Sched_Op<"program", [
    Symbol, NoTerminator, SingleBlock, IsolatedFromAbove,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "The per-rank program of one training step of a plan";
  let description = [{
    Ops run in order on the compute stream; asynchronous ops (collectives on
    the communication stream, copies on the host-to-device and device-to-host
    streams) start when the compute stream reaches them and finish at an
    event. Buffers marked `persistent` live across steps (parameters,
    gradients, optimizer state); all others are allocated and freed within
    the step. `micro_batches` is the plan's grad_accum.

    The recipe the passes read (`model`, `cluster`, `train`, `parallel`) is
    the plan's, copied onto the program by `sched-lower` so that the passes
    run on each program alone; the verifier keeps it equal to the plan's.
    Units and groups stay in the plan, named by symbol.

    Under pipeline parallelism a plan has one program per pipeline rank,
    `@<plan>.stage<k>` with `stage k`: the units of the model chunks that
    rank runs, their state, and the sched.send / sched.recv that connect it
    to its neighbours. A rank runs the program of its pipeline coordinate.

    ```mlir
    sched.program @tiny.step for @tiny micro_batches 2
        model <family = llama, ...> cluster <...> train <...> parallel <...> {
      ...
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, FlatSymbolRefAttr:$plan,
                       OptionalAttr<I64Attr>:$stage,
                       I64Attr:$micro_batches, Sched_PlanAttr<"Model">:$model,
                       Sched_PlanAttr<"Cluster">:$cluster,
                       Sched_PlanAttr<"Train">:$train,
                       Sched_PlanAttr<"Parallel">:$parallel);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `for` $plan (`stage` $stage^)? `micro_batches` $micro_batches
    `model` $model `cluster` $cluster `train` $train `parallel` $parallel
    attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The plan this program runs (null if the symbol does not resolve).
    ::plan::PlanOp getPlanOp();
    /// Ranks in `group` according to the plan's mesh; 0 if unknown.
    int64_t getGroupSize(::sched::Group group);
    /// Whether this program computes `unit`: every unit, or under pipeline
    /// parallelism those of the chunks its stage runs.
    bool runsUnit(::plan::UnitOp unit);
    /// Whether it holds `group`'s state: whether it runs the group's units,
    /// or, under pipeline parallelism, a unit tied to a parameter of the
    /// group (the last stage's replica of the input embedding's group).
    bool holdsGroup(::plan::GroupOp group);
  }];
}

def Sched_RepeatOp : Sched_Op<"repeat", [
    NoTerminator, SingleBlock, RecursiveMemoryEffects,
    HasParent<"ProgramOp">]> {
  let summary = "Micro-batches that run the same ops, lowered once";
  let description = [{
    Runs its body `count` times in a row. In iteration `k` (from 0), every
    op of the body that names a micro-batch runs that micro-batch plus `k`;
    everything else is the same in each iteration: the buffers (the same
    arena offsets), the collectives, the waits. The body is self-contained:
    what it allocates it frees, what it issues it waits for, and it frees
    and waits for nothing from outside. sched-roll-micro-batches makes one
    of the middle micro-batches of gradient accumulation; the consumers
    after it (the time model, the report, the schedule file's export) run
    the body `count` times.

    ```mlir
    sched.repeat count 6 {
      sched.forward @tiny::@layers.0 mb 1 ...
      ...
    }
    ```
  }];
  let arguments = (ins I64Attr:$count);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "`count` $count attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

def Sched_TasksOp : Sched_Op<"tasks", [
    NoTerminator, SingleBlock, HasParent<"ProgramOp">]> {
  let summary = "Bodies of ops run in the order of a table";
  let description = [{
    Holds `sched.task` ops, each a body of ops written for one micro-batch,
    and runs them in the order of `order`, pairs `(task, micro-batch)`
    flattened: entry `i` runs task `order[2i]` (its index among the
    `sched.task` ops) for micro-batch `order[2i + 1]`, every op of the body
    that names a micro-batch naming that micro-batch plus the run's
    difference from the body's. A pipeline stage's micro-batch loop: each
    distinct forward and backward of its chunks once, in the 1F1B order of
    every micro-batch.

    What one run leaves to a later one lives in slots: a `sched.slot` of a
    program buffer (a micro-batch's saved activations, a received tensor)
    and a slot event, an instance of one of the `event_families` families
    per micro-batch, which `sched.slot_signal` names the event of an
    asynchronous op and `sched.slot_event` names for a wait. Everything else
    a body holds is its own, as a `sched.repeat` body's (docs/sched.md, "The
    micro-batch loop"). The schedule file holds it as the program's tasks
    and runs (docs/schedule-format.md, "Tasks").

    `picks`, one integer per entry, is the slot each run takes of the
    pools its body's picked `sched.slot`s name (-1 for a run whose body
    names none): the forward and backward of one chunk's micro-batch the
    same, chosen so that no two micro-batches in flight at once share one
    (sched-share-slot-buffers).

    ```mlir
    sched.tasks event_families 1 order [0, 0, 0, 1, 1, 0, 1, 1] {
      sched.task micro_batch 0 { ... }
      sched.task micro_batch 0 { ... }
    }
    ```
  }];
  let arguments = (ins I64Attr:$event_families, DenseI64ArrayAttr:$order,
                       OptionalAttr<DenseI64ArrayAttr>:$picks);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `event_families` $event_families `order` $order (`picks` $picks^)? attr-dict-with-keyword $body
  }];
  let builders = [
    // A table without picks.
    OpBuilder<(ins "::mlir::IntegerAttr":$event_families,
                   "::mlir::DenseI64ArrayAttr":$order),
    [{ build($_builder, $_state, event_families, order, {}); }]>,
    OpBuilder<(ins "uint64_t":$event_families,
                   "::llvm::ArrayRef<int64_t>":$order),
    [{ build($_builder, $_state, event_families, order, {}); }]>
  ];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The tasks, in the order their indices count.
    ::llvm::SmallVector<TaskOp> getTasks();
  }];
}

def Sched_TaskOp : Sched_Op<"task", [
    NoTerminator, SingleBlock, HasParent<"TasksOp">]> {
  let summary = "One body of a sched.tasks";
  let description = [{
    Ops written for micro-batch `micro_batch`, which the table of the
    enclosing sched.tasks runs for other micro-batches too. What it
    allocates it frees and what it issues it waits for, but for the buffers
    in slots (`sched.slot`) and the events it gives a slot event instance
    (`sched.slot_signal`); it frees and waits for nothing from outside but
    its slot events (`sched.slot_event`).
  }];
  let arguments = (ins I64Attr:$micro_batch);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "`micro_batch` $micro_batch attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

def Sched_SlotOp : Sched_Op<"slot", [Pure, HasParent<"TaskOp">]> {
  let summary = "The slot of a program buffer a task's run takes";
  let description = [{
    In the run of micro-batch `mb`, slot `(mb + shift) mod slots` of
    `source`, a buffer of the program (outside the sched.tasks): elements
    `[s * n, (s + 1) * n)` for slot `s` and the result's `n` elements. A
    micro-batch's tensor that one task writes and a later one reads: the
    forward's saved activations for the backward, a received activation.

    ```mlir
    %s = sched.slot %saves[0] slots 3 : memref<3072xf32, #sched.space<device>> to memref<1024xf32, #sched.space<device>>
    ```

    A picked slot (`group`, `stride` and `offset` given; shift 0) is the
    slot the enclosing sched.tasks' `picks` names for the run instead:
    elements `[p * stride + offset, p * stride + offset + n)` for pick `p`,
    of a pool whose slots the buffers of several groups share (a stage's
    chunks' saved activations, each chunk a group laid out at its offsets
    in a slot). What holds a picked slot is the group's micro-batch: a slot
    is held by one group's micro-batch at a time (sched-verify-schedule).

    ```mlir
    %s = sched.slot %pool[0] slots 5 group 1 stride 4096 offset 1024 : memref<20480xf32, #sched.space<device>> to memref<2048xf32, #sched.space<device>>
    ```
  }];
  let arguments = (ins Sched_Buffer:$source, I64Attr:$shift, I64Attr:$slots,
                       OptionalAttr<I64Attr>:$group,
                       OptionalAttr<I64Attr>:$stride,
                       OptionalAttr<I64Attr>:$offset);
  let results = (outs Sched_Buffer:$result);
  let assemblyFormat = [{
    $source `[` $shift `]` `slots` $slots (`group` $group^ `stride` $stride `offset` $offset)? attr-dict `:` type($source) `to` type($result)
  }];
  let builders = [
    // A slot of its micro-batch (not picked).
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$source,
                   "::mlir::IntegerAttr":$shift, "::mlir::IntegerAttr":$slots),
    [{ build($_builder, $_state, result, source, shift, slots, {}, {}, {}); }]>
  ];
  let extraClassDeclaration = [{
    /// Whether the run's pick (the sched.tasks' `picks`) names the slot.
    bool isPicked() { return getGroup().has_value(); }
    /// The first element of slot `slot`: `slot * stride + offset` picked,
    /// `slot * n` otherwise.
    int64_t slotStart(int64_t slot);
  }];
  let hasVerifier = 1;
  let isInstruction = 0;
}

def Sched_SlotEventOp : Sched_Op<"slot_event", [Pure, HasParent<"TaskOp">]> {
  let summary = "The event of a slot event instance";
  let description = [{
    In the run of micro-batch `mb`, instance `mb + shift` of slot event
    family `family` of the enclosing sched.tasks: the event that a
    `sched.slot_signal` of the same instance in a run before this one
    names. A task waits for it, or lists it in an asynchronous op's `after`.

    ```mlir
    %received = sched.slot_event family 0 shift 0
    sched.wait %received
    ```
  }];
  let arguments = (ins I64Attr:$family, I64Attr:$shift);
  let results = (outs Sched_EventType:$event);
  let assemblyFormat = "`family` $family `shift` $shift attr-dict";
  let hasVerifier = 1;
  let isInstruction = 0;
}

def Sched_SlotSignalOp : Sched_Op<"slot_signal", [HasParent<"TaskOp">]> {
  let summary = "An asynchronous op's event, as a slot event instance";
  let description = [{
    In the run of micro-batch `mb`, the asynchronous op that defines `event`
    (in the same task) signals instance `mb + shift` of slot event family
    `family`, which a later run waits for through `sched.slot_event`. The
    task then does not wait for `event` itself.

    ```mlir
    %sent = sched.send %act to next ... : memref<...>
    sched.slot_signal %sent family 1 shift 0
    ```
  }];
  let arguments = (ins Sched_EventType:$event, I64Attr:$family,
                       I64Attr:$shift);
  let assemblyFormat = "$event `family` $family `shift` $shift attr-dict";
  let hasVerifier = 1;
  let isInstruction = 0;
}

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

def Sched_AllocOp : Sched_Op<"alloc", [
    MemoryEffects<[MemAlloc<DefaultResource>]>]> {
  let summary = "A flat buffer";
  let description = [{
    `name` says what it holds for people and for the memory plan; `role`
    classifies it. A `persistent` buffer lives across steps and is never
    freed; any other is freed by `sched.free` in the same step. `offset`,
    set by the memory planner, places it in its memory space's arena.

    A `held` buffer (a transient one of a program, before its `sched.tasks`,
    that only the bodies' one-slot `sched.slot`s use, directly or through
    views of it) claims its bytes only while a micro-batch holds its slot:
    from the first use of that micro-batch's slot to its last, or to the
    wait that completes an asynchronous op using it. The memory planner sets
    it, and places the buffer where the bodies' own buffers may lie while no
    micro-batch holds it (docs/sched.md, `sched-plan-memory`).

    ```mlir
    %w = sched.alloc "layers.0.param" role param persistent : memref<4096xbf16, #sched.space<device>>
    %p = sched.alloc "slots.gathered.0" role gathered offset 512 held : memref<4096xbf16, #sched.space<device>>
    ```
  }];
  let arguments = (ins StrAttr:$name, Sched_BufferRoleAttr:$role,
                       UnitAttr:$persistent, OptionalAttr<I64Attr>:$offset,
                       UnitAttr:$held);
  let results = (outs Sched_Buffer:$buffer);
  let builders = [
    OpBuilder<(ins "::mlir::Type":$buffer, "::llvm::StringRef":$name,
                   "::sched::BufferRole":$role, "bool":$persistent,
                   "::mlir::IntegerAttr":$offset), [{
      build($_builder, $_state, buffer, name, role, persistent, offset,
            /*held=*/false);
    }]>
  ];
  let assemblyFormat = [{
    $name `role` custom<EnumKeyword>($role) (`persistent` $persistent^)? (`offset` $offset^)?
    (`held` $held^)? attr-dict `:` type($buffer)
  }];
  let hasVerifier = 1;
}

def Sched_FreeOp : Sched_Op<"free", [MemoryEffects<[MemFree]>]> {
  let summary = "End of a transient buffer's life";
  let arguments = (ins Arg<Sched_Buffer, "", [MemFree]>:$buffer);
  let assemblyFormat = "$buffer attr-dict `:` type($buffer)";
  let hasVerifier = 1;
}

def Sched_ViewOp : Sched_Op<"view", [Pure]> {
  let summary = "A contiguous part of a buffer";
  let description = [{
    Elements `[offset, offset + size)` of `source`, where size is the
    result's. Used for each unit's parameters inside its group's flat buffer
    and for gradients inside a reduction bucket.

    ```mlir
    %u = sched.view %w[1024] : memref<4096xf32, #sched.space<device>> to memref<2048xf32, #sched.space<device>>
    ```
  }];
  let arguments = (ins Sched_Buffer:$source, I64Attr:$offset);
  let results = (outs Sched_Buffer:$result);
  let assemblyFormat = [{
    $source `[` $offset `]` attr-dict `:` type($source) `to` type($result)
  }];
  let hasVerifier = 1;
}

def Sched_ShardViewOp : Sched_Op<"shard_view", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "This rank's shard of a buffer";
  let description = [{
    The `i`-th of `n` equal slices of `source`, where `n` is the size of
    `group` and `i` this rank's index in it (zero1's parameter shard inside
    the full parameters).
  }];
  let arguments = (ins Sched_Buffer:$source, Sched_GroupAttr:$group);
  let results = (outs Sched_Buffer:$result);
  let assemblyFormat = [{
    $source `group` custom<EnumKeyword>($group) attr-dict `:` type($source) `to` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Asynchronous ops: collectives and copies
//===----------------------------------------------------------------------===//

def Sched_WaitOp : Sched_Op<"wait"> {
  let summary = "The compute stream waits for an asynchronous op";
  let arguments = (ins Sched_EventType:$event);
  let assemblyFormat = "$event attr-dict";
}

class Sched_AsyncOp<string mnemonic, list<Trait> traits = []>
    : Sched_Op<mnemonic, traits> {
  // `after`: events of other asynchronous ops this one must follow (for
  // example the host-to-device copy that fills an all-gather's input).
  let results = (outs Sched_EventType:$done);
}

def Sched_AllGatherOp : Sched_AsyncOp<"all_gather", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Gather every rank's shard of a group into a full buffer";
  let description = [{
    `dst` (n times the size of `src`, n = group size) receives the `src` of
    every rank of `group`, in rank order.

    ```mlir
    %e = sched.all_gather %shard into %full group shard : memref<2048xbf16, #sched.space<device>>, memref<4096xbf16, #sched.space<device>>
    ```
  }];
  let arguments = (ins Arg<Sched_Buffer, "", [Sched_Reads]>:$src,
                       Arg<Sched_Buffer, "", [Sched_Writes]>:$dst,
                       Sched_GroupAttr:$group, Variadic<Sched_EventType>:$after);
  let assemblyFormat = [{
    $src `into` $dst `group` custom<EnumKeyword>($group) (`after` $after^)? attr-dict `:`
    type($src) `,` type($dst)
  }];
  let hasVerifier = 1;
  let fileChecks = [Sched_SameElementType<["src", "dst"]>,
                    Sched_NumelTimesGroup<"dst", "src">,
                    Sched_Roles<["src"], ["param", "master", "staging", "frozen", "exchange"]>,
                    Sched_Roles<["dst"], ["gathered", "param", "staging", "frozen", "exchange"]>];
}

def Sched_ReduceScatterOp : Sched_AsyncOp<"reduce_scatter", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Reduce full buffers over a group, each rank keeping its shard";
  let description = [{
    `dst` (1/n of `src`) receives this rank's slice of the reduction of every
    rank's `src`; with `accumulate` it is added to what `dst` holds.
  }];
  let arguments = (ins Arg<Sched_Buffer, "", [Sched_Reads]>:$src,
                       Arg<Sched_Buffer, "",
                           [Sched_WritesOrUpdatesWith<"accumulate">]>:$dst,
                       Sched_GroupAttr:$group, Sched_ReduceOpAttr:$reduce,
                       UnitAttr:$accumulate, Variadic<Sched_EventType>:$after);
  let assemblyFormat = [{
    $src `into` $dst `group` custom<EnumKeyword>($group) `reduce` custom<EnumKeyword>($reduce)
    (`accumulate` $accumulate^)? (`after` $after^)? attr-dict `:`
    type($src) `,` type($dst)
  }];
  let hasVerifier = 1;
  let fileChecks = [Sched_SameElementType<["src", "dst"]>,
                    Sched_NumelTimesGroup<"src", "dst">,
                    Sched_Roles<["src"], ["unsharded_grad", "bucket", "grad", "staging", "exchange"]>,
                    Sched_Roles<["dst"], ["grad", "staging", "exchange"]>];
}

def Sched_AllReduceOp : Sched_AsyncOp<"all_reduce"> {
  let summary = "Reduce a buffer over a group, in place";
  let arguments = (ins Arg<Sched_Buffer, "", [Sched_Updates]>:$buffer,
                       Sched_GroupAttr:$group, Sched_ReduceOpAttr:$reduce,
                       Variadic<Sched_EventType>:$after);
  let assemblyFormat = [{
    $buffer `group` custom<EnumKeyword>($group) `reduce` custom<EnumKeyword>($reduce) (`after` $after^)? attr-dict `:`
    type($buffer)
  }];
  let hasVerifier = 1;
}

def Sched_BroadcastOp : Sched_AsyncOp<"broadcast", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Copy the root rank's buffer to every rank of a group";
  // The root rank reads the buffer, every other rank overwrites it.
  let arguments = (ins Arg<Sched_Buffer, "", [Sched_Updates]>:$buffer,
                       Sched_GroupAttr:$group, I64Attr:$root,
                       Variadic<Sched_EventType>:$after);
  let assemblyFormat = [{
    $buffer `group` custom<EnumKeyword>($group) `root` $root (`after` $after^)? attr-dict `:`
    type($buffer)
  }];
  let fileChecks = [Sched_RankOfGroup<"root">];
}

def Sched_SendOp : Sched_AsyncOp<"send", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Send a buffer to the neighbouring pipeline stage";
  let description = [{
    Pipeline parallelism: `buffer` goes to the same rank of the `next`
    stage (the output of `unit`, the last unit of this stage's chunk, for
    micro-batch `mb`) or of the `prev` one (the gradient of the input of
    `unit`, the first unit of its chunk). Each send has one `sched.recv` on
    the neighbour naming the same unit and micro-batch, of the same size and
    type; a neighbour's sends and receives pair up in program order
    (sched-verify-pipeline proves it, and that the stages cannot deadlock).
    On the communication stream, like a collective; the buffer must not be
    written or freed until the compute stream has waited for the event.

    ```mlir
    %e = sched.send %y to next for @tiny::@layers.1 mb 0 : memref<4096xbf16, #sched.space<device>>
    ```
  }];
  let arguments = (ins Arg<Sched_Buffer, "", [Sched_Reads]>:$buffer,
                       Sched_PeerAttr:$peer, Sched_UnitRefAttr:$unit,
                       Sched_MicroBatchAttr:$micro_batch,
                       Variadic<Sched_EventType>:$after);
  let assemblyFormat = [{
    $buffer `to` custom<EnumKeyword>($peer) `for` $unit `mb` $micro_batch (`after` $after^)? attr-dict `:`
    type($buffer)
  }];
  let fileChecks = [Sched_Roles<["buffer"], ["exchange"]>];
}

def Sched_RecvOp : Sched_AsyncOp<"recv", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Receive a buffer from the neighbouring pipeline stage";
  let description = [{
    The other end of a `sched.send`: `buffer` is overwritten with what the
    `prev` stage sent (the output of `unit` for micro-batch `mb`, this
    chunk's input) or the `next` one (the gradient of `unit`'s input, the
    gradient of this chunk's output). Nothing may read the buffer until the
    compute stream has waited for the event.

    ```mlir
    %e = sched.recv %x from prev for @tiny::@layers.1 mb 0 : memref<4096xbf16, #sched.space<device>>
    ```
  }];
  let arguments = (ins Arg<Sched_Buffer, "", [Sched_Writes]>:$buffer,
                       Sched_PeerAttr:$peer, Sched_UnitRefAttr:$unit,
                       Sched_MicroBatchAttr:$micro_batch,
                       Variadic<Sched_EventType>:$after);
  let assemblyFormat = [{
    $buffer `from` custom<EnumKeyword>($peer) `for` $unit `mb` $micro_batch (`after` $after^)? attr-dict `:`
    type($buffer)
  }];
  let fileChecks = [Sched_Roles<["buffer"], ["exchange"]>];
}

def Sched_CopyOp : Sched_AsyncOp<"copy"> {
  let summary = "Copy between memory spaces (host<->device)";
  let description = [{
    On the host-to-device stream when `dst` is on the device, on the
    device-to-host stream otherwise. Same element type and size.
  }];
  let arguments = (ins Arg<Sched_Buffer, "", [Sched_Reads]>:$src,
                       Arg<Sched_Buffer, "", [Sched_Writes]>:$dst,
                       Variadic<Sched_EventType>:$after);
  let assemblyFormat = [{
    $src `into` $dst (`after` $after^)? attr-dict `:` type($src) `,` type($dst)
  }];
  let hasVerifier = 1;
  let fileChecks = [Sched_SameElementType<["src", "dst"]>,
                    Sched_SameNumel<["src", "dst"]>];
}

//===----------------------------------------------------------------------===//
// Element-wise ops on the compute stream
//===----------------------------------------------------------------------===//

def Sched_CastOp : Sched_Op<"cast"> {
  let summary = "Convert a buffer to another float type";
  let arguments = (ins Arg<Sched_Buffer, "", [Sched_Reads]>:$src,
                       Arg<Sched_Buffer, "", [Sched_Writes]>:$dst);
  let assemblyFormat = "$src `into` $dst attr-dict `:` type($src) `,` type($dst)";
  let hasVerifier = 1;
  let fileChecks = [Sched_SameNumel<["src", "dst"]>];
}

def Sched_DequantizeOp : Sched_Op<"dequantize", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "A unit's frozen base, from how it is stored to the working type";
  let description = [{
    `src` holds the frozen parameters of `unit` as they are stored (a
    QLoRA base: bytes, each parameter in NF4 with double quantization or
    raw in its dense type, in parameter order; otherwise elements of
    another float type than the working one); `dst` receives them in its
    element type, laid out as compute reads `frozen`. Inserted before the
    compute ops that read a base not stored in the working type
    (sched-dequantize-base).

    ```mlir
    sched.dequantize @tiny::@layers.0 %stored into %base : memref<24072xi8, #sched.space<device>>, memref<46208xbf16, #sched.space<device>>
    ```
  }];
  let arguments = (ins Sched_UnitRefAttr:$unit,
                       Arg<Sched_Buffer, "", [Sched_Reads]>:$src,
                       Arg<Sched_Buffer, "", [Sched_Writes]>:$dst);
  let assemblyFormat = [{
    $unit $src `into` $dst attr-dict `:` type($src) `,` type($dst)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The plan.unit whose base this converts (null if it does not resolve).
    ::plan::UnitOp getUnitOp(::mlir::SymbolTableCollection &symbolTable);
  }];
  let fileChecks = [Sched_FrozenStorage<"src", "dst">,
                    Sched_Roles<["src"], ["frozen", "gathered", "staging"]>,
                    Sched_Roles<["dst"], ["staging"]>];
}

def Sched_ZeroOp : Sched_Op<"zero"> {
  let summary = "Fill a buffer with zeros";
  let arguments = (ins Arg<Sched_Buffer, "", [Sched_Writes]>:$buffer);
  let assemblyFormat = "$buffer attr-dict `:` type($buffer)";
}

def Sched_AccumulateOp : Sched_Op<"accumulate"> {
  let summary = "dst += src (converting src's float type if it differs)";
  let arguments = (ins Arg<Sched_Buffer, "", [Sched_Reads]>:$src,
                       Arg<Sched_Buffer, "", [Sched_Updates]>:$dst);
  let assemblyFormat = "$src `into` $dst attr-dict `:` type($src) `,` type($dst)";
  let hasVerifier = 1;
  let fileChecks = [Sched_SameNumel<["src", "dst"]>];
}

//===----------------------------------------------------------------------===//
// Compute of one unit for one micro-batch
//===----------------------------------------------------------------------===//

class Sched_ComputeOp<string mnemonic, list<Trait> traits = []>
    : Sched_Op<mnemonic, traits> {
  code computeExtraDeclaration = [{
    /// The plan.unit this op computes (null if the symbol does not resolve).
    ::plan::UnitOp getUnitOp(::mlir::SymbolTableCollection &symbolTable);
  }];
}

def Sched_ForwardOp : Sched_ComputeOp<"forward", [AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Forward of one unit for one micro-batch";
  let description = [{
    Reads the unit's parameters (`params`: exactly its stored elements that
    train, in its parameters' order; `frozen`: its frozen ones, the base of
    a LoRA run, in the working type; `tied`: the unit that stores a
    parameter this one ties to) and writes what backward needs into
    `saves`. The embedding's input is the micro-batch's tokens; every other
    unit's input is the previous unit's output, which its `saves` holds.

    Under tensor parallelism a unit is computed in parts (`part k`, in
    order), separated by its activation collectives: part `k > 0` reads
    what the collective after part `k - 1` left (`in`), and a part followed
    by a collective writes what it exchanges (`out`): the partial sum of a
    row-parallel layer, the input of a column-parallel one, or the loss's
    statistics (runtime/format/TensorParallelParts.h). Every part appends
    to the same `saves`.
  }];
  let arguments = (ins Sched_UnitRefAttr:$unit,
                       Sched_MicroBatchAttr:$micro_batch,
                       DefaultValuedAttr<Sched_PartAttr, "0">:$part,
                       Arg<Optional<Sched_Buffer>, "", [Sched_Reads]>:$params,
                       Arg<Optional<Sched_Buffer>, "", [Sched_Reads]>:$tied,
                       Arg<Optional<Sched_Buffer>, "", [Sched_Reads]>:$frozen,
                       Arg<Optional<Sched_Buffer>, "", [Sched_Reads]>:$in,
                       Arg<Sched_Buffer, "", [Sched_Writes]>:$saves,
                       Arg<Optional<Sched_Buffer>, "", [Sched_Writes]>:$out);
  let assemblyFormat = [{
    $unit `mb` $micro_batch (`part` $part^)?
    (`params` `(` $params^ `:` type($params) `)`)?
    (`tied` `(` $tied^ `:` type($tied) `)`)?
    (`frozen` `(` $frozen^ `:` type($frozen) `)`)?
    (`in` `(` $in^ `:` type($in) `)`)?
    `saves` `(` $saves `:` type($saves) `)`
    (`out` `(` $out^ `:` type($out) `)`)? attr-dict
  }];
  let extraClassDeclaration = computeExtraDeclaration;
  let fileChecks = [Sched_UnitStorage<"params", "tied", "frozen">,
                    Sched_Roles<["params"], ["param", "gathered", "staging"]>,
                    Sched_Roles<["tied", "frozen"], ["param", "gathered", "staging", "frozen"]>,
                    Sched_Roles<["saves"], ["activations"]>,
                    Sched_Roles<["in", "out"], ["exchange"]>];
}

def Sched_RecomputeOp : Sched_ComputeOp<"recompute", [
    AttrSizedOperandSegments, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Forward again in backward (activation checkpointing)";
  let description = [{
    With activation checkpointing the forward of a block saves only its
    input; recompute runs the forward again from it and saves everything its
    backward needs into `saves`. Under tensor parallelism it runs in parts
    as the forward does (with the same collectives between them); part 0
    reads the saved input (`from`), the others what the collective before
    them left (`in`).
  }];
  let arguments = (ins Sched_UnitRefAttr:$unit,
                       Sched_MicroBatchAttr:$micro_batch,
                       DefaultValuedAttr<Sched_PartAttr, "0">:$part,
                       Arg<Optional<Sched_Buffer>, "", [Sched_Reads]>:$params,
                       Arg<Optional<Sched_Buffer>, "", [Sched_Reads]>:$tied,
                       Arg<Optional<Sched_Buffer>, "", [Sched_Reads]>:$frozen,
                       Arg<Optional<Sched_Buffer>, "", [Sched_Reads]>:$input,
                       Arg<Optional<Sched_Buffer>, "", [Sched_Reads]>:$in,
                       Arg<Sched_Buffer, "", [Sched_Writes]>:$saves,
                       Arg<Optional<Sched_Buffer>, "", [Sched_Writes]>:$out);
  let assemblyFormat = [{
    $unit `mb` $micro_batch (`part` $part^)?
    (`params` `(` $params^ `:` type($params) `)`)?
    (`tied` `(` $tied^ `:` type($tied) `)`)?
    (`frozen` `(` $frozen^ `:` type($frozen) `)`)?
    (`from` `(` $input^ `:` type($input) `)`)?
    (`in` `(` $in^ `:` type($in) `)`)?
    `saves` `(` $saves `:` type($saves) `)`
    (`out` `(` $out^ `:` type($out) `)`)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = computeExtraDeclaration;
  let fileChecks = [Sched_UnitStorage<"params", "tied", "frozen">,
                    Sched_Roles<["params"], ["param", "gathered", "staging"]>,
                    Sched_Roles<["tied", "frozen"], ["param", "gathered", "staging", "frozen"]>,
                    Sched_Roles<["input", "saves"], ["activations"]>,
                    Sched_Roles<["in", "out"], ["exchange"]>];
}

def Sched_LossOp : Sched_Op<"loss", [AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Cross-entropy of the head's logits; seeds backward";
  let description = [{
    Records the micro-batch's loss and seeds backward with `scale` (1 /
    micro_batches, so accumulated gradients average) times the loss scale
    when `loss_scale` is given (fp16). Under tensor parallelism the head's
    logits are divided over the vocabulary: `stats` holds every tensor
    rank's statistics of its slice (the all-gather of the head's last
    part's `out`), from which each rank gets the loss of the whole
    vocabulary.
  }];
  let arguments = (ins Sched_UnitRefAttr:$unit,
                       Sched_MicroBatchAttr:$micro_batch, F64Attr:$scale,
                       Arg<Optional<Sched_Scalar>, "", [Sched_Reads]>:$loss_scale,
                       Arg<Optional<Sched_Buffer>, "", [Sched_Reads]>:$stats);
  let assemblyFormat = [{
    $unit `mb` $micro_batch `scale` $scale
    (`loss_scale` `(` $loss_scale^ `:` type($loss_scale) `)`)?
    (`stats` `(` $stats^ `:` type($stats) `)`)? attr-dict
  }];
  let hasVerifier = 1;
}

def Sched_BackwardOp : Sched_ComputeOp<"backward", [
    AttrSizedOperandSegments, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Backward of one unit for one micro-batch";
  let description = [{
    Adds the gradients of the unit's stored parameters that train into
    `grads` (same layout as `params`, given together with it) and, when it
    ties a parameter stored elsewhere that trains, that parameter's gradient
    into `tied_grads`. Frozen parameters (`frozen`, and `tied` when it is
    frozen) get no gradient. Reads and then no longer needs `activations`.

    Under tensor parallelism it runs the forward's parts in reverse: part
    `k` reads the gradient of what its forward exchanged (`out_grad`, after
    that boundary's backward collective) and, for `k > 0`, writes the
    gradient of its `in` (`in_grad`), which the collective before part
    `k - 1` exchanges.
  }];
  let arguments = (ins Sched_UnitRefAttr:$unit,
                       Sched_MicroBatchAttr:$micro_batch,
                       DefaultValuedAttr<Sched_PartAttr, "0">:$part,
                       Arg<Optional<Sched_Buffer>, "", [Sched_Reads]>:$params,
                       Arg<Optional<Sched_Buffer>, "", [Sched_Reads]>:$tied,
                       Arg<Optional<Sched_Buffer>, "", [Sched_Reads]>:$frozen,
                       Arg<Sched_Buffer, "", [Sched_Reads]>:$activations,
                       Arg<Optional<Sched_Buffer>, "", [Sched_Reads]>:$out_grad,
                       Arg<Optional<Sched_Buffer>, "", [Sched_Updates]>:$grads,
                       Arg<Optional<Sched_Buffer>, "", [Sched_Updates]>:$tied_grads,
                       Arg<Optional<Sched_Buffer>, "", [Sched_Writes]>:$in_grad);
  let assemblyFormat = [{
    $unit `mb` $micro_batch (`part` $part^)?
    (`params` `(` $params^ `:` type($params) `)`)?
    (`tied` `(` $tied^ `:` type($tied) `)`)?
    (`frozen` `(` $frozen^ `:` type($frozen) `)`)?
    `activations` `(` $activations `:` type($activations) `)`
    (`out_grad` `(` $out_grad^ `:` type($out_grad) `)`)?
    (`grads` `(` $grads^ `:` type($grads) `)`)?
    (`tied_grads` `(` $tied_grads^ `:` type($tied_grads) `)`)?
    (`in_grad` `(` $in_grad^ `:` type($in_grad) `)`)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = computeExtraDeclaration;
  let fileChecks = [Sched_UnitStorage<"params", "tied", "frozen">,
                    Sched_GivenTogether<"params", "grads">,
                    Sched_TiedGrads<"tied", "tied_grads">,
                    Sched_SameNumel<["params", "grads"]>,
                    Sched_SameNumel<["tied", "tied_grads"]>,
                    Sched_Roles<["params"], ["param", "gathered", "staging"]>,
                    Sched_Roles<["tied", "frozen"], ["param", "gathered", "staging", "frozen"]>,
                    Sched_Roles<["activations"], ["activations"]>,
                    Sched_Roles<["grads", "tied_grads"], ["unsharded_grad", "bucket", "grad", "staging"]>,
                    Sched_Roles<["out_grad", "in_grad"], ["exchange"]>];
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

def Sched_GradNormOp : Sched_Op<"grad_norm", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Add the sum of squares of a gradient buffer to a scalar";
  let description = [{
    With `tensor_replicas` (a mesh with a tensor axis), `grads` is a group's
    gradients (the buffer an optimizer_step of the group steps), and the
    elements of its parameters that every tensor rank holds whole (no
    `split`) count 1/T, so that the sum over the tensor group counts each
    once.
  }];
  let arguments = (ins Arg<Sched_Buffer, "", [Sched_Reads]>:$grads,
                       Arg<Sched_Scalar, "", [Sched_Updates]>:$norm,
                       UnitAttr:$tensor_replicas);
  let assemblyFormat = [{
    $grads `into` $norm (`tensor_replicas` $tensor_replicas^)? attr-dict `:`
    type($grads) `,` type($norm)
  }];
  let hasVerifier = 1;
}

def Sched_CheckFiniteOp : Sched_Op<"check_finite"> {
  let summary = "Set a flag to 1 if a buffer holds an inf or a NaN";
  // Sets the flag only on overflow: it must hold a value already.
  let arguments = (ins Arg<Sched_Buffer, "", [Sched_Reads]>:$buffer,
                       Arg<Sched_Scalar, "", [Sched_Updates]>:$found_inf);
  let assemblyFormat = "$buffer `into` $found_inf attr-dict `:` type($buffer) `,` type($found_inf)";
}

def Sched_OptimizerStepOp : Sched_Op<"optimizer_step", [
    AttrSizedOperandSegments, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "One optimizer step on a group's shard";
  let description = [{
    Updates `params` (the fp32 master, or the parameters themselves in fp32)
    from `grads` with the plan's optimizer (AdamW: `state` = exp_avg,
    exp_avg_sq; SGD: momentum, or nothing), at the learning rate of the
    plan's schedule for this step. Gradients are first divided by
    `loss_scale` when given and multiplied by min(1, grad_clip / sqrt(norm))
    when `norm` (a global sum of squares) is given. The step is skipped when
    `found_inf` is non-zero. All buffers are one memory space: the step runs
    where they live (device, or host when the optimizer is offloaded).
  }];
  let arguments = (ins Sched_GroupRefAttr:$group,
                       Arg<Sched_Buffer, "", [Sched_Updates]>:$params,
                       Arg<Sched_Buffer, "", [Sched_Reads]>:$grads,
                       Arg<Variadic<Sched_Buffer>, "", [Sched_Updates]>:$state,
                       Arg<Optional<Sched_Scalar>, "", [Sched_Reads]>:$norm,
                       Arg<Optional<Sched_Scalar>, "", [Sched_Reads]>:$found_inf,
                       Arg<Optional<Sched_Scalar>, "", [Sched_Reads]>:$loss_scale);
  let assemblyFormat = [{
    $group `params` `(` $params `:` type($params) `)`
    `grads` `(` $grads `:` type($grads) `)`
    `state` `(` ($state^ `:` type($state))? `)`
    (`norm` `(` $norm^ `:` type($norm) `)`)?
    (`found_inf` `(` $found_inf^ `:` type($found_inf) `)`)?
    (`loss_scale` `(` $loss_scale^ `:` type($loss_scale) `)`)? attr-dict
  }];
  let hasVerifier = 1;
  let fileChecks = [Sched_SameNumel<["params", "grads", "state"]>,
                    Sched_ElementTypeF32<["params", "grads", "state"]>,
                    Sched_OptimizerState<"state">,
                    Sched_Roles<["params"], ["param", "master", "staging"]>,
                    Sched_Roles<["grads"], ["grad", "unsharded_grad", "bucket", "staging"]>,
                    Sched_Roles<["state"], ["exp_avg", "exp_avg_sq", "momentum"]>];
}

def Sched_UpdateLossScaleOp : Sched_Op<"update_loss_scale"> {
  let summary = "Dynamic loss scaling: back off on overflow, grow when stable";
  let arguments = (ins Arg<Sched_Scalar, "", [Sched_Updates]>:$loss_scale,
                       Arg<Sched_Scalar, "", [Sched_Reads]>:$found_inf);
  let assemblyFormat = [{
    $loss_scale `found_inf` $found_inf attr-dict `:` type($loss_scale) `,`
    type($found_inf)
  }];
}

#endif // SCHED_OPS_TD
