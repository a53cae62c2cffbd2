#!/usr/bin/env python3
"""Tensor parallelism trains as one rank does.

Each case compiles a tiny model with a tensor axis (planc), trains it STEPS steps with
plan-run on local CPU ranks, and compares every step's loss and gradient norm with the
single-rank no_shard run of the same model, seed, synthetic data and global batch
(8 sequences of 64 tokens a step): fp32, within FP32_RTOL relative at every step.
Both runs clip at a bound no norm reaches, so that both compute the norm and the
clip coefficient is exactly 1.

The cases are the issue's matrix (docs/language.md, "Tensor parallelism"): tp 2;
tp 2 with sequence parallelism; tp 2 x dp 2 with full_shard, and tp 2 x dp 4 with hybrid_shard (two
replicas of two shards, the smallest hybrid mesh);
grouped-query attention with kv_heads = tensor (llama_tiny: 4 heads, 2 key/value
heads); GPT-2 (its fused c_attn, tied vocabulary-parallel head and row-parallel biases),
also with a vocabulary the ranks do not divide (padded);
and sequence parallelism with activation checkpointing and gradient accumulation, where
the parts are recomputed and the whole parameters' gradients are summed over the
tensor group once per accumulated buffer.

With --plan-checkpoint, checkpoints too (docs/checkpoints.md): a tensor-parallel run
(tp 2 + SP, full_shard over 2 data-parallel ranks) saves every 2 steps; resumed at step 2
with its own schedule it continues bitwise as the run did; resumed with the single-rank
schedule (reshard tp 2 -> 1), and the single-rank run's checkpoint resumed with the
tensor-parallel schedule (1 -> 2), each continues as the single-rank run does within
FP32_RTOL; and the HuggingFace export of each run's last checkpoint, trained one step from
by the single-rank schedule (--init), gives the same loss within FP32_RTOL.

The script prints one line per case and ends with `N passed, N failed`.

usage: tensor_parallel.py --planc PLANC --plan-run PLAN_RUN [--plan-checkpoint TOOL]
           [--steps N] [--work DIR] [--only TEXT]
"""
import os
import sys

from plan_runs import (FP32_RTOL, GLOBAL_BATCH, CheckpointedRuns, check_checkpoint, common,
                       compare, exported_losses, main, train)

# A model's --set flags, where it is not a preset as it is.
MODEL_SETS = {
    # A vocabulary 2 ranks do not divide: rank 1's slice ends in a padding
    # row, which the lookup never reads and the loss never predicts.
    "gpt2_tiny_vocab511": ["model=gpt2_tiny", "model.vocab=511"],
}

# name: (model, world size, data-parallel ranks, grad_accum, --set flags)
CASES = [
    ("llama tp2", "llama_tiny", 2, 1, 1, ["parallel.tensor=2"]),
    ("llama tp2 sp", "llama_tiny", 2, 1, 1,
     ["parallel.tensor=2", "parallel.sequence_parallel=true"]),
    ("llama tp2 x dp2 full_shard", "llama_tiny", 4, 2, 1,
     ["parallel.tensor=2", "parallel.sharding=full_shard"]),
    # hybrid_shard needs two replicas of at least two shards: dp 4.
    ("llama tp2 x dp4 hybrid_shard", "llama_tiny", 8, 4, 1,
     ["parallel.tensor=2", "parallel.sharding=hybrid_shard", "parallel.mesh=(2, 2)"]),
    ("llama gqa kv_heads=tensor=2 sp full_shard", "llama_tiny", 4, 2, 1,
     ["model.kv_heads=2", "parallel.tensor=2", "parallel.sequence_parallel=true",
      "parallel.sharding=full_shard"]),
    ("llama tp2 sp checkpointing accum 2", "llama_tiny", 2, 1, 2,
     ["parallel.tensor=2", "parallel.sequence_parallel=true",
      "train.activation_checkpointing=full"]),
    ("gpt2 tp2", "gpt2_tiny", 2, 1, 1, ["parallel.tensor=2"]),
    ("gpt2 tp2 sp x dp2 full_shard accum 2", "gpt2_tiny", 4, 2, 2,
     ["parallel.tensor=2", "parallel.sequence_parallel=true",
      "parallel.sharding=full_shard"]),
    ("gpt2 tp2 sp padded vocabulary (511)", "gpt2_tiny_vocab511", 2, 1, 1,
     ["parallel.tensor=2", "parallel.sequence_parallel=true"]),
]


def checkpoint_cases(args):
    """Save, resume, reshard and export a tensor-parallel run; yields (name, rel, tol)."""
    tp_sets = common("llama_tiny", 1, GLOBAL_BATCH // 2) + [
        "cluster.gpus_per_node=4", "parallel.tensor=2", "parallel.sequence_parallel=true",
        "parallel.sharding=full_shard"]
    ref_sets = common("llama_tiny", 1, GLOBAL_BATCH) + [
        "cluster.gpus_per_node=1", "parallel.sharding=no_shard"]
    r = CheckpointedRuns(args, "tp", tp_sets, 4, ref_sets)
    tp_sched, ref_sched, tp_dir, ref_dir = r.sched, r.ref_sched, r.dir, r.ref_dir
    tp_run, ref_run = r.run, r.ref_run
    step2 = "step-00000002"
    yield ("tp2 checkpointing run vs single rank", compare(tp_run, ref_run), FP32_RTOL)
    # Its description names the tensor axis, and every rank's file checks out.
    check_checkpoint(args, os.path.join(tp_dir, step2),
                     "1x2x2 (replicate x shard x tensor)")
    resumed = train(args, tp_sched, 4, "ckpt-tp-resumed",
                    ["--resume", os.path.join(tp_dir, step2)])
    yield ("tp2 resumed at step 2 vs its run (bitwise)", compare(resumed, tp_run), 0.0)
    to_one = train(args, ref_sched, 1, "ckpt-tp-to-1", ["--resume", os.path.join(tp_dir, step2)])
    yield ("tp2 checkpoint resumed on 1 rank (tp 2 -> 1)", compare(to_one, ref_run), FP32_RTOL)
    to_two = train(args, tp_sched, 4, "ckpt-1-to-tp",
                   ["--resume", os.path.join(ref_dir, step2)])
    yield ("1-rank checkpoint resumed with tp2 (1 -> 2)", compare(to_two, ref_run), FP32_RTOL)
    losses = exported_losses(args, (("tp", tp_dir), ("ref", ref_dir)), ref_sched,
                             ref_run)
    yield ("HF export of the tp2 run vs of the single-rank run (one step from each)",
           compare(losses[0], losses[1]), FP32_RTOL)


if __name__ == "__main__":
    sys.exit(main("plan-tensor-parallel-", CASES,
                  lambda model, accum, micro_batch: common(
                      model, accum, micro_batch, MODEL_SETS.get(model)),
                  checkpoint_cases))
