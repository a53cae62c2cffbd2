#!/usr/bin/env python3
"""Measured peak memory against the plan's, on the cpu backend (docs/benchmarks.md,
"Memory: measured against planned").

For each case: planc compiles examples/tiny_llama_cpu.plan with the case's --set flags,
plan-run trains it for --steps steps, and rank 0's highest `peak_bytes` over the steps is
printed (measured: the peak bytes of the process's CPU tensors during a step, the arenas
included; with several ranks it varies from step to step with the timing of Gloo's
collectives, and the plan is an upper bound for every step) next to `planned_bytes` (the
schedule's arenas and workspace), their difference and the difference as a share of the
plan; with a pipeline, each other stage's first rank on a line of its own (plan-run's
`stage_peak_bytes`, against its own stage program's plan). The same comparison runs on a GPU
as a test (test/equivalence/gpu_peak.py, within 2%). A case whose model saved tensors
outside the planned saves buffers says so (plan-run's warning).

usage: peak_vs_plan.py --planc PLANC --plan-run PLAN_RUN [--steps 3] [--work DIR]
                       [--max-off PCT]

With --max-off it is a check (test/e2e/peak-vs-plan.test): exit 1 when a case is more
than PCT% off.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from runtime_bench import MODEL_SETS, PLAN

TINY = ["train.seq_len=128", "train.micro_batch=4"]
LORA = ["model.lora.rank=4", "model.lora.alpha=8", "model.lora.targets=[all_linear]"]
# bert_base_cased's structure at the size of the tiny models.
BERT_TINY = ["model=bert_base_cased", "model.vocab=1024", "model.hidden=64",
             "model.intermediate=256", "model.layers=2", "model.heads=4",
             "model.max_seq_len=128"]
CASES = [
    # name, world, --set flags
    ("llama_tiny fp32", 1, ["model=llama_tiny"] + TINY),
    ("llama_tiny bf16", 1, ["model=llama_tiny", "train.precision=bf16_mixed"] + TINY),
    ("llama_tiny bf16 checkpointed", 1,
     ["model=llama_tiny", "train.precision=bf16_mixed", "train.activation_checkpointing=full"]
     + TINY),
    ("llama_tiny fp32 full_shard x2", 2, ["model=llama_tiny"] + TINY),
    ("llama_tiny fp32 full_shard x4", 4, ["model=llama_tiny", "train.seq_len=128",
                                          "train.micro_batch=2"]),
    # 6 micro-batches: lowered once for the 4 middle ones (a sched.repeat the
    # schedule file lists run by run).
    ("llama_tiny fp32 full_shard x2, 6 micro-batches", 2,
     ["model=llama_tiny", "train.grad_accum=6"] + TINY),
    ("llama_tiny bf16 zero1 x4", 4, ["model=llama_tiny", "train.seq_len=128",
                                     "train.micro_batch=2", "train.precision=bf16_mixed",
                                     "parallel.sharding=zero1"]),
    # no_shard's default gradient layout: fp32 gradients backward adds into.
    ("llama_tiny bf16 no_shard x2 (fp32 grads)", 2,
     ["model=llama_tiny", "train.precision=bf16_mixed", "parallel.sharding=no_shard",
      "train.grad_clip=1.0", "train.grad_accum=2"] + TINY),
    ("llama_tiny bf16 full_shard x2 grad_dtype=fp32", 2,
     ["model=llama_tiny", "train.precision=bf16_mixed", "train.grad_dtype=fp32",
      "train.grad_clip=1.0"] + TINY),
    ("gpt2_tiny bf16", 1, ["model=gpt2_tiny", "train.precision=bf16_mixed"] + TINY),
    # Tensor parallelism: each unit in parts, the exchanged buffers in the
    # arena, a part's input copied once (Model.cpp, runPart).
    ("llama_tiny fp32 tensor 2", 2,
     ["model=llama_tiny", "parallel.tensor=2", "parallel.sharding=no_shard"] + TINY),
    ("llama_tiny fp32 tensor 2 + SP", 2,
     ["model=llama_tiny", "parallel.tensor=2", "parallel.sequence_parallel=true",
      "parallel.sharding=no_shard"] + TINY),
    # A small vocabulary makes a block's part the peak: each part has its
    # own workspace (Llama's MLP forward with SP, GPT-2's attention forward
    # with SP), and on pipeline stage 0 a block's norm backward.
    ("llama_tiny fp32 tensor 2 + SP, vocab 64", 2,
     ["model=llama_tiny", "model.vocab=64", "parallel.tensor=2",
      "parallel.sequence_parallel=true", "parallel.sharding=no_shard"] + TINY),
    ("gpt2_tiny fp32 tensor 2 + SP, vocab 64", 2,
     ["model=gpt2_tiny", "model.vocab=64", "parallel.tensor=2",
      "parallel.sequence_parallel=true", "parallel.sharding=no_shard"] + TINY),
    ("bert masked_lm fp32", 1, BERT_TINY + TINY),
    ("bert masked_lm bf16 checkpointed", 1,
     BERT_TINY + TINY + ["train.precision=bf16_mixed",
                         "train.activation_checkpointing=full"]),
    ("bert classification fp32 full_shard x2", 2,
     BERT_TINY + TINY + ["model.head=sequence_classification", "model.num_labels=3"]),
    # LoRA: a frozen base (no weight gradients), adapters added in place. A
    # small vocabulary makes the blocks' backward the peak, where the base's
    # weight gradients would have been.
    ("llama_tiny fp32 LoRA all_linear, vocab 64", 1,
     ["model=llama_tiny", "model.vocab=64"] + LORA + TINY),
    ("gpt2_tiny bf16 LoRA default targets", 1,
     ["model=gpt2_tiny", "train.precision=bf16_mixed", "model.lora.rank=8"] + TINY),
    ("bert masked_lm fp32 LoRA all_linear, vocab 64, checkpointed", 1,
     BERT_TINY + TINY + LORA + ["model.vocab=64", "train.activation_checkpointing=full"]),
    ("llama_tiny fp32 LoRA full_shard x2", 2, ["model=llama_tiny"] + LORA + TINY),
    # QLoRA: the blocks' base gathered as NF4 bytes, dequantized into a
    # transient buffer before each compute op (and its chunked temporaries).
    ("llama_tiny fp32 QLoRA all_linear, vocab 64", 1,
     ["model=llama_tiny", "model.vocab=64", "model.base=nf4"] + LORA + TINY),
    # LoRA dropout: each adapter's input dropped through a boolean mask,
    # drawn a few rows at a time (GPT-2's and BERT's MLP output projection
    # then hold the step's largest forward moment).
    ("gpt2_tiny fp32 LoRA dropout all_linear, vocab 64", 1,
     ["model=gpt2_tiny", "model.vocab=64", "model.lora.dropout=0.1"] + LORA + TINY),
    ("bert masked_lm fp32 LoRA dropout all_linear, vocab 64", 1,
     BERT_TINY + TINY + LORA + ["model.vocab=64", "model.lora.dropout=0.1"]),
    ("llama_tiny bf16 QLoRA full_shard x2, checkpointed", 2,
     ["model=llama_tiny", "train.precision=bf16_mixed", "model.base=nf4",
      "train.activation_checkpointing=full"] + LORA + TINY),
    # Each stage's first rank against its own program's arenas and workspace.
    ("llama_tiny fp32 pipeline 2 1f1b", 2,
     ["model=llama_tiny", "model.layers=4", "train.grad_accum=4",
      "parallel.pipeline=2", "parallel.sharding=no_shard"] + TINY),
    ("llama_tiny bf16 pipeline 2 1f1b full_shard, checkpointed", 2,
     ["model=llama_tiny", "model.layers=4", "train.grad_accum=4",
      "train.precision=bf16_mixed", "train.activation_checkpointing=full",
      "parallel.pipeline=2"] + TINY),
    ("llama_tiny bf16 pipeline 2 interleaved(2), checkpointed", 2,
     ["model=llama_tiny", "model.layers=4", "train.grad_accum=4",
      "train.precision=bf16_mixed", "train.activation_checkpointing=full",
      "parallel.pipeline=2", "parallel.schedule=interleaved(2)"] + TINY),
    ("llama_tiny bf16 pipeline 4 interleaved(2), checkpointed", 4,
     ["model=llama_tiny", "model.layers=8", "train.grad_accum=4",
      "train.precision=bf16_mixed", "train.activation_checkpointing=full",
      "parallel.pipeline=4", "parallel.schedule=interleaved(2)"] + TINY),
    ("llama_tiny fp32 pipeline 2 x tensor 2", 4,
     ["model=llama_tiny", "model.layers=4", "train.grad_accum=4",
      "parallel.pipeline=2", "parallel.tensor=2", "parallel.sharding=no_shard"] + TINY),
    ("llama_tiny fp32 LoRA pipeline 2 1f1b", 2,
     ["model=llama_tiny", "model.layers=4", "train.grad_accum=4",
      "parallel.pipeline=2", "parallel.sharding=no_shard"] + LORA + TINY),
    # Tied embeddings: the last stage holds a replica of the embedding's
    # group (its shard of parameters, gradient and optimizer state), whose
    # gradient the two stages add on the embedding group.
    ("gpt2_tiny fp32 pipeline 2 1f1b full_shard x2 (tied)", 4,
     ["model=gpt2_tiny", "model.layers=4", "train.grad_accum=4",
      "parallel.pipeline=2", "parallel.sharding=full_shard"] + TINY),
    # Gradients reduced once a step on the stages' tasks (no_shard: the last
    # micro-batch's backward all-reduces one persistent bucket), and
    # hybrid_shard's bf16 replica all-reduce in the last micro-batch's bodies.
    ("llama_tiny bf16 pipeline 2 interleaved(2) no_shard x2 last_micro_batch", 4,
     ["model=llama_tiny", "model.layers=4", "train.grad_accum=4",
      "train.precision=bf16_mixed", "parallel.pipeline=2",
      "parallel.schedule=interleaved(2)", "parallel.sharding=no_shard",
      "parallel.grad_sync=last_micro_batch"] + TINY),
    ("llama_tiny bf16 pipeline 2 hybrid_shard (2, 2)", 8,
     ["model=llama_tiny", "model.layers=4", "train.grad_accum=4",
      "train.precision=bf16_mixed", "train.grad_dtype=bf16", "parallel.pipeline=2",
      "parallel.sharding=hybrid_shard", "parallel.mesh=(2, 2)"] + TINY),
    # shard_grad_op on the stages' tasks: each stage's parameters gathered
    # once a step into buffers of the program that the loop keeps.
    ("llama_tiny bf16 pipeline 2 interleaved(2) shard_grad_op x2", 4,
     ["model=llama_tiny", "model.layers=4", "train.grad_accum=4",
      "train.precision=bf16_mixed", "parallel.pipeline=2",
      "parallel.schedule=interleaved(2)", "parallel.sharding=shard_grad_op"] + TINY),
    # BERT's classifier: a label per sequence, the embeddings on stage 0.
    ("bert classification fp32 pipeline 2 1f1b", 2,
     BERT_TINY + TINY + ["model.head=sequence_classification", "model.num_labels=3",
                         "train.grad_accum=4", "parallel.pipeline=2",
                         "parallel.sharding=no_shard"]),
    ("bench model fp32 (runtime_bench)", 1, MODEL_SETS),
    ("bench model bf16 vocab 32768", 1,
     MODEL_SETS + ["train.precision=bf16_mixed", "model.vocab=32768"]),
]


def mib(n):
    return f"{n / 2**20:8.2f} MiB"


def run_case(args, name, world, sets, work):
    sched = os.path.join(work, "case.sched")
    metrics = os.path.join(work, "case.jsonl")
    cmd = [args.planc, PLAN, "-o", sched, "--set", "cluster.nodes=1",
           "--set", f"cluster.gpus_per_node={world}"]
    for s in sets:
        cmd += ["--set", s]
    subprocess.run(cmd, check=True, capture_output=True)
    if os.path.exists(metrics):
        os.remove(metrics)
    run = [args.plan_run] + (["--nproc", str(world)] if world > 1 else []) + [
        sched, "--steps", str(args.steps), "--data", "synthetic", "--metrics", metrics,
        "--quiet", "--timeout", "600"]
    p = subprocess.run(run, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"peak_vs_plan.py: {name}: plan-run failed:\n{p.stderr}")
    with open(metrics) as f:
        steps = [json.loads(line) for line in f if line.strip()]
    warned = "unplanned saves" if "outside the planned saves buffers" in p.stderr else ""

    def line(label, peak, planned):
        off = 100 * (peak / planned - 1)
        print(f"{label:34s} measured {mib(peak)}  planned {mib(planned)}  "
              f"over {peak - planned:+11d} B  {off:+6.2f}%  {warned}", flush=True)
        return off

    offs = [line(name, max(s["peak_bytes"] for s in steps), steps[-1]["planned_bytes"])]
    # With a pipeline, the first rank of every other stage too (plan-run
    # hands them to rank 0's metrics).
    stages = len(steps[-1].get("stage_peak_bytes", []))
    for k in range(1, stages):
        offs.append(line(f"  {name}: stage {k}",
                         max(s["stage_peak_bytes"][k] for s in steps),
                         steps[-1]["stage_planned_bytes"][k]))
    return offs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--planc", required=True)
    ap.add_argument("--plan-run", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--work", default=None)
    ap.add_argument("--max-off", type=float, default=None, metavar="PCT",
                    help="exit 1 when a case's measured peak is more than PCT%% "
                         "above or below the plan's")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="plan-peak-")
    os.makedirs(work, exist_ok=True)
    offs = [run_case(args, name, world, sets, work) for name, world, sets in CASES]
    if args.max_off is None:
        return 0
    for case_offs, (name, _, _) in zip(offs, CASES):
        worst = max(abs(off) for off in case_offs)
        if worst > args.max_off:
            print(f"peak_vs_plan.py: a measured peak is {worst:.2f}% off the plan, "
                  f"more than {args.max_off}% ({name})")
            return 1
    programs = sum(len(case_offs) for case_offs in offs)
    print(f"{len(offs)} cases ({programs} programs) within {args.max_off}% of the plan")
    return 0


if __name__ == "__main__":
    sys.exit(main())
