#!/usr/bin/env python3
"""Pipeline parallelism trains as one rank does.

Each case compiles a tiny Llama of 8 blocks with a pipeline axis (planc: one program
per stage, sched.send / sched.recv between them), trains it on local CPU ranks, and
compares every step's loss and gradient norm with the single-rank no_shard run of the
same model, seed, synthetic data and global batch (plan_runs.py): fp32, within
FP32_RTOL relative at every step.

The cases are the issue's matrix (docs/language.md, "Pipeline parallelism"): pipeline
2 and 4 with gpipe, 1f1b and interleaved(2) (two model chunks per stage, the chunks
wrapping from the last stage to the first), and 3 with 1f1b; explicit stages; pipeline 2 x data
parallel 2 with full_shard; 1f1b with activation checkpointing and no_shard over 2
data-parallel ranks; full_shard interleaved, hybrid_shard and zero1 with FSDP's
collectives overlapping across a stage's tasks; full_shard with parameters and
optimizer state offloaded; and with tensor parallelism: pp 2 x tp
2, with sequence parallelism, interleaving and checkpointing, and dp 2 x pp 2 x tp 2 on
8 ranks; and LoRA (adapters on every linear layer; QLoRA's NF4 base with dropout), each
against the single-rank LoRA run; and BERT with a sequence-classification head, pp 2
and pp 2 x dp 2 interleaved. Tied input and output embeddings (the last stage's replica
of the embedding's group, the gradients added on the embedding group): GPT-2 pp 2
1f1b, pp 2 x dp 2 full_shard and zero1, pp 2 x tp 2, and LoRA (a tie to the frozen
base); a tied Llama pp 4 interleaved(2) (two stages outside the embedding group) and
pp 2 x dp 2 whole_model (the embedding in a group of its own); BERT's masked-LM head
pp 2. Gradient clipping that clips every step (the norm summed over the stages), with
SGD: pp 2 x dp 2 full_shard and pp 2 x tp 2 with sequence parallelism.

With --plan-checkpoint, checkpoints too (docs/checkpoints.md): a pipeline-2 x dp-2 run
saves every 2 steps (each stage's ranks their own groups); resumed at step 2 with its
own schedule it continues bitwise as the run did; resumed with the single-rank
schedule (reshard pp 2 -> 1) and with a pipeline of 4 (2 -> 4), and the single-rank
run's checkpoint resumed with the pipeline schedule (1 -> 2), each continues as the
single-rank run does within FP32_RTOL, as does a pp 2 x tp 2 (SP) run's checkpoint
resumed on one rank; and the HuggingFace export of the pipeline
run's last checkpoint, trained one step from by the single-rank schedule (--init),
gives the loss the single-rank run's export gives, within FP32_RTOL. A LoRA pp 2 run's
checkpoint resumes bitwise and on one rank, and its export merged into the base trains
as the single-rank LoRA run's does; both export PEFT adapter files. A BERT classifier's
pp 2 checkpoint resumes on one rank and exports to HuggingFace as the single-rank run's.
A GPT-2 pp 2 x dp 2 run's checkpoint (the replica not saved) resumes bitwise, on one
rank, and with pp 4 (its replica read from the embedding's entries), and exports to
HuggingFace as the single-rank run's.

The script prints one line per case and ends with `N passed, N failed`.

usage: pipeline_parallel.py --planc PLANC --plan-run PLAN_RUN [--plan-checkpoint TOOL]
           [--steps N] [--work DIR] [--only TEXT]
"""
import os
import sys

from plan_runs import (FP32_RTOL, GLOBAL_BATCH, CheckpointedRuns, check_checkpoint, common,
                       compare, compile_plan, export, exported_losses, main, train)

MODEL = "llama8"
LORA = "llama8-lora"
QLORA = "llama8-qlora-dropout"
ADAPTERS = ["model.lora.rank=4", "model.lora.alpha=8", "model.lora.targets=[all_linear]"]
MODEL_SETS = {MODEL: ["model=llama_tiny", "model.layers=8"]}
MODEL_SETS[LORA] = MODEL_SETS[MODEL] + ADAPTERS
MODEL_SETS[QLORA] = MODEL_SETS[LORA] + ["model.lora.dropout=0.1", "model.base=nf4"]
# BERT with a sequence-classification head (no tied weight), 4 blocks.
BERT = "bert4-classifier"
MODEL_SETS[BERT] = ["model=bert_base_cased", "model.vocab=1024", "model.hidden=64",
                    "model.intermediate=256", "model.layers=4", "model.heads=4",
                    "model.max_seq_len=128", "model.head=sequence_classification",
                    "model.num_labels=3"]

# Tied input and output embeddings: GPT-2 (always tied), 4 blocks; the tiny
# Llama of 8 with tie_embeddings; BERT's masked-LM decoder, 4 blocks.
GPT2 = "gpt2-4"
MODEL_SETS[GPT2] = ["model=gpt2_tiny", "model.layers=4"]
GPT2_LORA = "gpt2-4-lora"
MODEL_SETS[GPT2_LORA] = MODEL_SETS[GPT2] + ADAPTERS
TIED = "llama8-tied"
MODEL_SETS[TIED] = MODEL_SETS[MODEL] + ["model.tie_embeddings=true"]
BERT_MLM = "bert4-mlm"
MODEL_SETS[BERT_MLM] = [s for s in MODEL_SETS[BERT]
                        if not s.startswith(("model.head=", "model.num_labels="))]
# Gradient clipping that clips every step (the shared flags set it out of
# reach): the norm is the whole model's, summed over the stages. With SGD,
# whose update is proportional to the clipped gradient (AdamW's is nearly
# independent of a constant factor), a stage clipping by its own norm
# would move its weights differently.
CLIPPED = "llama8-clipped-sgd"
MODEL_SETS[CLIPPED] = MODEL_SETS[MODEL]
AFTER_COMMON = {CLIPPED: ["train.grad_clip=0.05",
                          "train.optimizer=sgd(lr = 0.5, momentum = 0.9)"]}

# name: (model, world size, data-parallel ranks, grad_accum, --set flags)
CASES = [
    ("pp2 gpipe", MODEL, 2, 1, 4, ["parallel.pipeline=2", "parallel.schedule=gpipe"]),
    ("pp2 1f1b", MODEL, 2, 1, 4, ["parallel.pipeline=2", "parallel.schedule=1f1b"]),
    ("pp4 gpipe", MODEL, 4, 1, 4, ["parallel.pipeline=4", "parallel.schedule=gpipe"]),
    ("pp4 1f1b", MODEL, 4, 1, 4, ["parallel.pipeline=4", "parallel.schedule=1f1b"]),
    ("pp3 1f1b", MODEL, 3, 1, 4, ["parallel.pipeline=3"]),
    ("pp2 interleaved(2)", MODEL, 2, 1, 4,
     ["parallel.pipeline=2", "parallel.schedule=interleaved(2)"]),
    ("pp4 interleaved(2)", MODEL, 4, 1, 4,
     ["parallel.pipeline=4", "parallel.schedule=interleaved(2)"]),
    ("pp2 1f1b stages [3, 5]", MODEL, 2, 1, 4,
     ["parallel.pipeline=2", "parallel.stages=[3, 5]"]),
    ("pp2 x dp2 full_shard 1f1b", MODEL, 4, 2, 2,
     ["parallel.pipeline=2", "parallel.sharding=full_shard"]),
    ("pp2 x dp2 no_shard 1f1b checkpointing", MODEL, 4, 2, 2,
     ["parallel.pipeline=2", "parallel.sharding=no_shard",
      "train.activation_checkpointing=full"]),
    # FSDP's collectives overlapping across a stage's tasks (a task's first
    # gather during the task before, a backward's last reductions during the
    # forward after), with the other sharded strategies.
    ("pp2 x dp2 full_shard interleaved(2) forward_prefetch", MODEL, 4, 2, 2,
     ["parallel.pipeline=2", "parallel.sharding=full_shard",
      "parallel.schedule=interleaved(2)", "parallel.forward_prefetch=true"]),
    ("pp2 x dp4 hybrid_shard (2, 2) 1f1b forward_prefetch", MODEL, 8, 4, 2,
     ["parallel.pipeline=2", "parallel.sharding=hybrid_shard", "parallel.mesh=(2, 2)",
      "parallel.forward_prefetch=true"]),
    ("pp2 x dp2 zero1 1f1b", MODEL, 4, 2, 2,
     ["parallel.pipeline=2", "parallel.sharding=zero1"]),
    # ZeRO-2: each stage's parameters gathered once a step, by its first
    # micro-batch's forward (a chunk's first gather issued by the task
    # before), and kept until the step.
    ("pp2 x dp2 shard_grad_op interleaved(2) forward_prefetch", MODEL, 4, 2, 4,
     ["parallel.pipeline=2", "parallel.sharding=shard_grad_op",
      "parallel.schedule=interleaved(2)", "parallel.forward_prefetch=true"]),
    # DDP's no_sync() under a pipeline (Megatron's way): each stage's
    # gradients accumulate over its micro-batches and are all-reduced after
    # the last one's backward, in the tasks that micro-batch alone runs.
    ("pp2 x dp2 no_shard interleaved(2) grad_sync last_micro_batch", MODEL, 4, 2, 4,
     ["parallel.pipeline=2", "parallel.sharding=no_shard",
      "parallel.schedule=interleaved(2)", "parallel.grad_sync=last_micro_batch"]),
    # A sharded gradient reduced once a step: FSDP's no_sync() and
    # DeepSpeed's ZeRO-1 under a pipeline (the full gradient accumulated
    # over the micro-batches, reduce-scattered after the last one's
    # backward).
    ("pp2 x dp2 full_shard interleaved(2) grad_sync last_micro_batch", MODEL, 4, 2, 4,
     ["parallel.pipeline=2", "parallel.sharding=full_shard",
      "parallel.schedule=interleaved(2)", "parallel.grad_sync=last_micro_batch"]),
    ("pp2 x dp2 zero1 1f1b grad_sync last_micro_batch", MODEL, 4, 2, 4,
     ["parallel.pipeline=2", "parallel.sharding=zero1",
      "parallel.grad_sync=last_micro_batch"]),
    # Each stage's parameters and optimizer state offloaded (the copies to
    # and from the host around its own tasks, its optimizer step there).
    ("pp2 x dp2 full_shard 1f1b offload params + optimizer", MODEL, 4, 2, 2,
     ["parallel.pipeline=2", "parallel.sharding=full_shard",
      "parallel.offload.params=cpu", "parallel.offload.optimizer=cpu"]),
    # With tensor parallelism: the residual stream crosses the stages as each
    # tensor rank holds it (its slice of the sequence under SP).
    ("pp2 x tp2 1f1b", MODEL, 4, 1, 4, ["parallel.pipeline=2", "parallel.tensor=2"]),
    ("pp2 x tp2 sp interleaved(2) checkpointing", MODEL, 4, 1, 4,
     ["parallel.pipeline=2", "parallel.tensor=2", "parallel.sequence_parallel=true",
      "parallel.schedule=interleaved(2)", "train.activation_checkpointing=full"]),
    # LoRA: each stage trains its units' adapters on its frozen base (an NF4
    # one dequantized by the stage).
    ("pp2 1f1b lora", LORA, 2, 1, 4, ["parallel.pipeline=2"]),
    ("pp2 x dp2 full_shard lora interleaved(2)", LORA, 4, 2, 2,
     ["parallel.pipeline=2", "parallel.sharding=full_shard",
      "parallel.schedule=interleaved(2)"]),
    ("pp2 qlora dropout 1f1b checkpointing", QLORA, 2, 1, 4,
     ["parallel.pipeline=2", "train.activation_checkpointing=full"]),
    ("pp2 x dp2 full_shard qlora dropout gpipe", QLORA, 4, 2, 2,
     ["parallel.pipeline=2", "parallel.sharding=full_shard", "parallel.schedule=gpipe"]),
    ("dp2 x pp2 x tp2 full_shard 1f1b", MODEL, 8, 2, 2,
     ["parallel.pipeline=2", "parallel.tensor=2", "parallel.sharding=full_shard"]),
    # BERT: the embedding (word, position and token-type) on the first stage,
    # the pooler and classifier on the last.
    ("pp2 1f1b bert classifier", BERT, 2, 1, 4, ["parallel.pipeline=2"]),
    ("pp2 x dp2 full_shard interleaved(2) bert classifier", BERT, 4, 2, 2,
     ["parallel.pipeline=2", "parallel.sharding=full_shard",
      "parallel.schedule=interleaved(2)"]),
    # Tied embeddings: the last stage reads and steps a replica of the
    # embedding's group; the first and last stages add its gradient.
    ("pp2 1f1b gpt2 (tied)", GPT2, 2, 1, 4, ["parallel.pipeline=2"]),
    ("pp2 x dp2 full_shard 1f1b gpt2 (tied)", GPT2, 4, 2, 2,
     ["parallel.pipeline=2", "parallel.sharding=full_shard"]),
    ("pp2 x dp2 zero1 gpipe gpt2 (tied)", GPT2, 4, 2, 2,
     ["parallel.pipeline=2", "parallel.sharding=zero1", "parallel.schedule=gpipe"]),
    ("pp2 x tp2 1f1b gpt2 (tied, vocabulary-parallel)", GPT2, 4, 1, 4,
     ["parallel.pipeline=2", "parallel.tensor=2"]),
    ("pp2 1f1b gpt2 lora (tied to the frozen base)", GPT2_LORA, 2, 1, 4,
     ["parallel.pipeline=2"]),
    ("pp4 interleaved(2) tied llama", TIED, 4, 1, 4,
     ["parallel.pipeline=4", "parallel.schedule=interleaved(2)"]),
    ("pp2 x dp2 no_shard whole_model tied llama", TIED, 4, 2, 2,
     ["parallel.pipeline=2", "parallel.sharding=no_shard",
      "parallel.wrap=whole_model"]),
    ("pp2 1f1b bert masked-lm (tied)", BERT_MLM, 2, 1, 4, ["parallel.pipeline=2"]),
    ("pp2 x dp2 full_shard 1f1b clipped", CLIPPED, 4, 2, 2,
     ["parallel.pipeline=2", "parallel.sharding=full_shard"]),
    ("pp2 x tp2 sp 1f1b clipped", CLIPPED, 4, 1, 4,
     ["parallel.pipeline=2", "parallel.tensor=2", "parallel.sequence_parallel=true"]),
]


def flags(model, accum, micro_batch):
    return common(model, accum, micro_batch, MODEL_SETS.get(model)) + \
        AFTER_COMMON.get(model, [])


def pp2_sets(model):
    """`model` on 2 pipeline stages, 4 micro-batches of a quarter of the batch."""
    return flags(model, 4, GLOBAL_BATCH // 4) + ["cluster.gpus_per_node=2",
                                                  "parallel.pipeline=2"]


def reference_sets(model):
    """`model` on one rank, the whole batch in one micro-batch."""
    return flags(model, 1, GLOBAL_BATCH) + ["cluster.gpus_per_node=1",
                                             "parallel.sharding=no_shard"]


def checkpoint_cases(args):
    """Save, resume, reshard and export a pipeline run; yields (name, rel, tol)."""
    pp_sets = flags(MODEL, 2, GLOBAL_BATCH // 4) + [
        "cluster.gpus_per_node=4", "parallel.pipeline=2", "parallel.sharding=full_shard"]
    pp4_sets = flags(MODEL, 4, GLOBAL_BATCH // 4) + [
        "cluster.gpus_per_node=4", "parallel.pipeline=4"]
    pp4_sched = compile_plan(args, pp4_sets, "ckpt-pp4")
    r = CheckpointedRuns(args, "pp", pp_sets, 4, reference_sets(MODEL))
    pp_sched, ref_sched, pp_dir, ref_dir = r.sched, r.ref_sched, r.dir, r.ref_dir
    pp_run, ref_run = r.run, r.ref_run
    every = ["--checkpoint-every", "2"]
    step2 = "step-00000002"
    yield ("pp2 x dp2 checkpointing run vs single rank", compare(pp_run, ref_run), FP32_RTOL)
    # Its description names the pipeline axis, and every rank's file checks out.
    check_checkpoint(args, os.path.join(pp_dir, step2),
                     "2x1x2x1 (pipeline x replicate x shard x tensor)")
    resumed = train(args, pp_sched, 4, "ckpt-pp-resumed",
                    ["--resume", os.path.join(pp_dir, step2)])
    yield ("pp2 resumed at step 2 vs its run (bitwise)", compare(resumed, pp_run), 0.0)
    to_one = train(args, ref_sched, 1, "ckpt-pp-to-1", ["--resume", os.path.join(pp_dir, step2)])
    yield ("pp2 checkpoint resumed on 1 rank (pp 2 -> 1)", compare(to_one, ref_run), FP32_RTOL)
    to_four = train(args, pp4_sched, 4, "ckpt-pp-to-4",
                    ["--resume", os.path.join(pp_dir, step2)])
    yield ("pp2 checkpoint resumed with pp4 (2 -> 4)", compare(to_four, ref_run), FP32_RTOL)
    to_two = train(args, pp_sched, 4, "ckpt-1-to-pp",
                   ["--resume", os.path.join(ref_dir, step2)])
    yield ("1-rank checkpoint resumed with pp2 (1 -> 2)", compare(to_two, ref_run), FP32_RTOL)
    # A 3-D checkpoint (pp 2 x tp 2 with SP) resumed on one rank.
    sets_3d = flags(MODEL, 4, GLOBAL_BATCH // 4) + [
        "cluster.gpus_per_node=4", "parallel.pipeline=2", "parallel.tensor=2",
        "parallel.sequence_parallel=true"]
    dir_3d = os.path.join(args.work, "ckpt-3d")
    run_3d = train(args, compile_plan(args, sets_3d, "ckpt-3d"), 4, "ckpt-3d-run",
                   ["--checkpoint-dir", dir_3d] + every)
    yield ("pp2 x tp2 sp checkpointing run vs single rank", compare(run_3d, ref_run),
           FP32_RTOL)
    from_3d = train(args, ref_sched, 1, "ckpt-3d-to-1", ["--resume", os.path.join(dir_3d, step2)])
    yield ("pp2 x tp2 checkpoint resumed on 1 rank", compare(from_3d, ref_run), FP32_RTOL)
    losses = exported_losses(args, (("pp", pp_dir), ("ref", ref_dir)), ref_sched,
                             ref_run)
    yield ("HF export of the pp2 run vs of the single-rank run (one step from each)",
           compare(losses[0], losses[1]), FP32_RTOL)
    yield from lora_checkpoint_cases(args, ref_sched, ref_run)
    yield from bert_checkpoint_cases(args)
    yield from tied_checkpoint_cases(args)


def tied_checkpoint_cases(args):
    """A GPT-2 pipeline checkpoint: the first stage saves the tied embedding,
    the last stage's replica is not saved and is restored from it."""
    sets = flags(GPT2, 2, GLOBAL_BATCH // 4) + [
        "cluster.gpus_per_node=4", "parallel.pipeline=2", "parallel.sharding=full_shard"]
    r = CheckpointedRuns(args, "gpt2-pp", sets, 4, reference_sets(GPT2))
    yield ("GPT-2 pp2 x dp2 checkpointing run vs single rank", compare(r.run, r.ref_run),
           FP32_RTOL)
    # Every rank's file checks out against checkpoint.json (no replica in it).
    check_checkpoint(args, r.step(2), "2x1x2x1 (pipeline x replicate x shard x tensor)")
    resumed = train(args, r.sched, 4, "ckpt-gpt2-pp-resumed", ["--resume", r.step(2)])
    yield ("GPT-2 pp2 resumed at step 2 vs its run (bitwise)", compare(resumed, r.run), 0.0)
    to_one = train(args, r.ref_sched, 1, "ckpt-gpt2-pp-to-1", ["--resume", r.step(2)])
    yield ("GPT-2 pp2 checkpoint resumed on 1 rank (pp 2 -> 1)", compare(to_one, r.ref_run),
           FP32_RTOL)
    pp4 = compile_plan(args, flags(GPT2, 4, GLOBAL_BATCH // 4) + [
        "cluster.gpus_per_node=4", "parallel.pipeline=4"], "ckpt-gpt2-pp4")
    to_four = train(args, pp4, 4, "ckpt-gpt2-pp-to-4", ["--resume", r.step(2)])
    yield ("GPT-2 pp2 checkpoint resumed with pp4 (2 -> 4)", compare(to_four, r.ref_run),
           FP32_RTOL)
    losses = exported_losses(args, (("gpt2-pp", r.dir), ("gpt2-ref", r.ref_dir)),
                             r.ref_sched, r.ref_run)
    yield ("HF export of the GPT-2 pp2 run vs of the single-rank run (one step from each)",
           compare(losses[0], losses[1]), FP32_RTOL)


def bert_checkpoint_cases(args):
    """A BERT classifier's pipeline checkpoint (the embeddings on stage 0, the
    pooler and classifier on stage 1) resumed on one rank, and exported to
    HuggingFace as the single-rank run's is."""
    r = CheckpointedRuns(args, "bert-pp", pp2_sets(BERT), 2, reference_sets(BERT))
    yield ("BERT pp2 checkpointing run vs single rank", compare(r.run, r.ref_run), FP32_RTOL)
    to_one = train(args, r.ref_sched, 1, "ckpt-bert-pp-to-1", ["--resume", r.step(2)])
    yield ("BERT pp2 checkpoint resumed on 1 rank (pp 2 -> 1)", compare(to_one, r.ref_run),
           FP32_RTOL)
    losses = exported_losses(args, (("bert-pp", r.dir), ("bert-ref", r.ref_dir)),
                             r.ref_sched, r.ref_run)
    yield ("HF export of the BERT pp2 run vs of the single-rank run (one step from each)",
           compare(losses[0], losses[1]), FP32_RTOL)


def lora_checkpoint_cases(args, plain_ref_sched, plain_ref_run):
    """A LoRA pipeline run's checkpoints: each stage saves its units' adapters
    and names the base; resumed with its own schedule (bitwise) and on one
    rank (pp 2 -> 1); exported merged into the base, and as PEFT adapter
    files, from the pipeline's checkpoint as from the single rank's."""
    r = CheckpointedRuns(args, "lora-pp", pp2_sets(LORA), 2, reference_sets(LORA))
    pp_sched, ref_sched, pp_dir, ref_dir = r.sched, r.ref_sched, r.dir, r.ref_dir
    pp_run, ref_run = r.run, r.ref_run
    yield ("LoRA pp2 checkpointing run vs single rank", compare(pp_run, ref_run), FP32_RTOL)
    step2 = os.path.join(pp_dir, "step-00000002")
    resumed = train(args, pp_sched, 2, "ckpt-lora-pp-resumed", ["--resume", step2])
    yield ("LoRA pp2 resumed at step 2 vs its run (bitwise)", compare(resumed, pp_run), 0.0)
    to_one = train(args, ref_sched, 1, "ckpt-lora-pp-to-1", ["--resume", step2])
    yield ("LoRA pp2 checkpoint resumed on 1 rank (pp 2 -> 1)", compare(to_one, ref_run),
           FP32_RTOL)
    # Merged into the base, a plain model: one step of the plain single-rank
    # schedule from each export.
    merged = []
    for tag, root in (("pp", pp_dir), ("ref", ref_dir)):
        last = os.path.join(root, f"step-{args.steps:08d}")
        out = os.path.join(args.work, f"lora-merged-{tag}")
        export(args, last, out, "--merged")
        merged.append(train(args, plain_ref_sched, 1, f"lora-merged-{tag}-init",
                            ["--init", out], steps=1))
        adapter = os.path.join(args.work, f"lora-adapter-{tag}")
        export(args, last, adapter, "--adapter")
        for name in ("adapter_config.json", "adapter_model.safetensors"):
            if not os.path.exists(os.path.join(adapter, name)):
                raise RuntimeError(f"export --adapter of {last} wrote no {name}")
    if abs(merged[0][0]["loss"] - plain_ref_run[0]["loss"]) <= 1e-3 * plain_ref_run[0]["loss"]:
        raise RuntimeError("the merged export trains as the seed does: it lost the adapters")
    yield ("LoRA export merged of the pp2 run vs of the single-rank run (one step from each)",
           compare(merged[0], merged[1]), FP32_RTOL)


if __name__ == "__main__":
    sys.exit(main("plan-pipeline-parallel-", CASES, flags, checkpoint_cases))
