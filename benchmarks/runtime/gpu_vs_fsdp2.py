#!/usr/bin/env python3
"""plan-run --backend cuda vs PyTorch FSDP2 (fully_shard) on one GPU, same model and batch.

Given a schedule compiled for one GPU (scripts/make-gpu-scheds.sh), this runs, in the same
invocation and on the same device:

  plan-run   the schedule with --backend cuda for STEPS steps; its metrics give the step
             times, the measured peak (`peak_bytes`) and the plan's (`planned_bytes`).
  FSDP2      the Llama the schedule describes (HuggingFace's LlamaForCausalLM when
             transformers is importable, else test/reference/llama_reference.py, the same
             math and names), fully_shard on every decoder layer and on the root over a
             one-rank NCCL mesh, MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)
             for bf16_mixed, torch.optim.AdamW(fused=True) with the schedule's
             hyper-parameters, the schedule's micro-batch, sequence length, gradient
             accumulation, activation checkpointing (per layer) and clipping. With
             --offload, CPUOffloadPolicy (parameters, gradients and the optimizer step on
             the host) against the schedule's own offloading. Eager mode, no torch.compile.

Both sides run STEPS steps and time each after a device synchronisation; tokens/s is the
tokens of the steps after WARMUP over their time. MFU = tokens/s x (6 N + 12 L h s) / peak,
N the model's parameters, L layers, h hidden size, s sequence length, peak the device's
dense bf16 rate (989 TFLOP/s for H100 SXM and H200; --peak-tflops overrides). Peak memory:
plan-run's measured peak (caching-allocator peak of a step, arena included, plus its host
arenas) and FSDP2's torch.cuda.max_memory_allocated() over the timed steps. Where planc's
report of the schedule's plan lies beside it (FILE.sched.report.json, which
scripts/make-gpu-scheds.sh writes), its predicted step time and peak are printed against
the measured ones. The initial
weights differ (the benchmark is about speed and memory), so the losses are printed, not
compared.

Prints a table and the ratios against the goals: tokens/s >= 1.1x FSDP2 and MFU >= 45% for
the ~1B model; >= 2x FSDP2's tokens/s with --offload. --json FILE writes the numbers.

Exit codes: 0 (also "skipped: no CUDA device" where there is none), 1 on an error, 77 when
the schedule needs more host memory than this machine has (so a driver can fall back to a
smaller schedule).

usage: gpu_vs_fsdp2.py --plan-run PLAN_RUN --schedule FILE.sched [--offload]
           [--steps N (20; 6 with --offload)] [--warmup N (5; 2)] [--peak-tflops T]
           [--json FILE] [--profile DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import runtime_bench as rb  # noqa: E402

sys.path.insert(0, os.path.join(rb.ROOT, "test", "reference"))

SKIP_CODE = 77
GIB = 2**30
# Dense bf16 tensor-core peaks (TFLOP/s, no sparsity), by a substring of the device name.
PEAK_BF16_TFLOPS = [("H100 PCIe", 756.0), ("H100", 989.4), ("H200", 989.4), ("GH200", 989.4),
                    ("B200", 2250.0), ("A100", 312.0), ("L40S", 362.1), ("A10G", 70.0)]
GOAL_TOKENS_RATIO = 1.1
GOAL_MFU = 0.45
GOAL_OFFLOAD_RATIO = 2.0
# --profile: each side runs again for this many steps and traces the last.
PROFILE_STEPS = 3


def import_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch without numpy warns on import
        import torch
    return torch


def host_memory_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


def model_config(schedule):
    m = schedule["model"]
    if m["family"] != "llama":
        raise SystemExit("gpu_vs_fsdp2.py: the schedule's model must be a Llama")
    return dict(family="llama", vocab=m["vocab"], hidden=m["hidden"],
                intermediate=m["intermediate"], layers=m["layers"], heads=m["heads"],
                kv_heads=m["kv_heads"], max_seq_len=m["max_seq_len"],
                rope_theta=m["rope_theta"], norm_eps=m["norm_eps"],
                tie=m["tie_embeddings"], rope_scaling=m.get("rope_scaling"))


def parameter_count(cfg):
    h, i, v, L = cfg["hidden"], cfg["intermediate"], cfg["vocab"], cfg["layers"]
    d = h // cfg["heads"]
    attn = h * h * 2 + 2 * h * cfg["kv_heads"] * d
    layer = attn + 3 * h * i + 2 * h
    return v * h * (1 if cfg["tie"] else 2) + L * layer + h


def flops_per_token(cfg, seq_len):
    """6 N for the matmuls of forward and backward, 12 L h s for attention's scores."""
    return 6 * parameter_count(cfg) + 12 * cfg["layers"] * cfg["hidden"] * seq_len


def peak_tflops(name, override):
    if override:
        return override
    for key, value in PEAK_BF16_TFLOPS:
        if key in name:
            return value
    return None


# --------------------------------------------------------------------------
# FSDP2 side (runs in its own process: --fsdp2-worker)
# --------------------------------------------------------------------------

def build_llama(cfg, torch):
    """HuggingFace's LlamaForCausalLM (SDPA attention) when transformers is importable,
    else the reference model; returns (model, decoder layers, source name)."""
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
        config = LlamaConfig(
            vocab_size=cfg["vocab"], hidden_size=cfg["hidden"],
            intermediate_size=cfg["intermediate"], num_hidden_layers=cfg["layers"],
            num_attention_heads=cfg["heads"], num_key_value_heads=cfg["kv_heads"],
            max_position_embeddings=cfg["max_seq_len"], rope_theta=cfg["rope_theta"],
            rms_norm_eps=cfg["norm_eps"], tie_word_embeddings=cfg["tie"],
            rope_scaling=(dict(cfg["rope_scaling"], rope_type="llama3")
                          if cfg["rope_scaling"] else None),
            attn_implementation="sdpa", use_cache=False)
        model = LlamaForCausalLM(config)
        return model, model.model.layers, "transformers LlamaForCausalLM"
    except ImportError:
        pass
    import llama_reference as ref

    def forward(self, tokens):  # the reference's, with the positions on the device
        x = self.embed_tokens(tokens)
        s = tokens.shape[1]
        freqs = torch.outer(torch.arange(s, dtype=torch.float32, device=tokens.device),
                            self.inv_freq.to(tokens.device))
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x)

    ref.LlamaModel.forward = forward
    model = ref.build_model(cfg)
    return model, model.model.layers, "test/reference/llama_reference.py"


def fsdp2_worker(args):
    torch = import_torch()
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    schedule = rb.read_schedule(args.schedule)
    cfg = model_config(schedule)
    train = schedule["train"]
    opt_cfg = train["optimizer"]
    mb, seq_len, accum = train["micro_batch"], train["seq_len"], train["grad_accum"]
    torch.cuda.set_device(0)
    device = torch.device("cuda", 0)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(args.port))
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=device)
    mesh = init_device_mesh("cuda", (1,))

    with torch.device("meta"):
        model, layers, source = build_llama(cfg, torch)
    if train["activation_checkpointing"] != "none":
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import \
            checkpoint_wrapper
        for i in range(len(layers)):
            layers[i] = checkpoint_wrapper(layers[i])
    kwargs = dict(mesh=mesh)
    if train["precision"] != "fp32":
        dtype = torch.bfloat16 if train["precision"].startswith("bf16") else torch.float16
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=dtype,
                                                   reduce_dtype=torch.float32)
    if args.offload:
        kwargs["offload_policy"] = CPUOffloadPolicy()
    for layer in layers:
        fully_shard(layer, **kwargs)
    fully_shard(model, **kwargs)
    model.to_empty(device="cpu" if args.offload else device)
    with torch.no_grad():
        generator = torch.Generator(device="cpu").manual_seed(train["seed"])
        for name, p in model.named_parameters():
            local = p.to_local() if hasattr(p, "to_local") else p
            if "norm" in name:
                local.fill_(1.0)
            else:
                local.copy_(torch.randn(local.shape, generator=generator) * 0.02)
        for name, buf in model.named_buffers():
            if name.endswith("inv_freq"):
                import llama_reference as ref
                buf.copy_(ref.rope_inv_freq(cfg))
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=opt_cfg["lr"],
                                betas=(opt_cfg["beta1"], opt_cfg["beta2"]),
                                eps=opt_cfg["eps"], weight_decay=opt_cfg["weight_decay"],
                                fused=True)
        fused = "fused"
    except (RuntimeError, ValueError):  # no fused kernel for these parameters
        opt = torch.optim.AdamW(model.parameters(), lr=opt_cfg["lr"],
                                betas=(opt_cfg["beta1"], opt_cfg["beta2"]),
                                eps=opt_cfg["eps"], weight_decay=opt_cfg["weight_decay"])
        fused = "foreach"

    generator = torch.Generator(device=device).manual_seed(train["seed"])
    rows = []
    profiler = None
    for step in range(1, args.steps + 1):
        if args.profile and step == args.steps:
            # The last step, as plan-run --profile: operators and every kernel.
            profiler = torch.profiler.profile(activities=[
                torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA])
            profiler.__enter__()
        if step == args.warmup + 1:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        batches = [torch.randint(0, cfg["vocab"], (mb, seq_len + 1), device=device,
                                 generator=generator) for _ in range(accum)]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        total = torch.zeros((), device=device)
        for k, batch in enumerate(batches):
            model.set_requires_gradient_sync(k == accum - 1)
            out = model(batch[:, :-1])
            logits = out.logits if hasattr(out, "logits") else out
            loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                                   batch[:, 1:].reshape(-1)) / accum
            loss.backward()
            total += loss.detach()
        if train["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), train["grad_clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_value = total.item()
        torch.cuda.synchronize()
        rows.append(dict(step=step, loss=loss_value, step_time_s=time.perf_counter() - t0,
                         tokens=mb * seq_len * accum))
        if profiler is not None:
            profiler.__exit__(None, None, None)
            profiler.export_chrome_trace(args.profile)
    result = dict(rows=rows, peak_bytes=torch.cuda.max_memory_allocated(device),
                  model_source=source, optimizer=fused)
    with open(args.fsdp2_worker, "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------

def run_plan_run(args, work, host_arenas, profile=None):
    metrics = os.path.join(work, "plan-run.jsonl")
    steps = PROFILE_STEPS if profile else args.steps
    cmd = [args.plan_run, args.schedule, "--backend", "cuda", "--steps", str(steps),
           "--data", "synthetic", "--metrics", metrics, "--quiet", "--timeout", "1800"]
    if profile:
        cmd += ["--profile", profile]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"plan-run failed ({p.returncode}): {' '.join(cmd)}\n"
                           f"{p.stdout}{p.stderr}")
    if profile:
        return None
    with open(metrics) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    timed = rows[args.warmup:]
    peak = max(r["peak_bytes"] for r in timed)
    # peak_bytes is the device's allocator peak plus the host arenas: the device's
    # part is what compares with FSDP2's torch.cuda.max_memory_allocated().
    return dict(rows=rows, peak_bytes=peak - host_arenas, peak_with_host_bytes=peak,
                planned_bytes=timed[-1].get("planned_bytes"))


def run_fsdp2(args, work, profile=None):
    out = os.path.join(work, "fsdp2.json")
    steps, warmup = (PROFILE_STEPS, 1) if profile else (args.steps, args.warmup)
    cmd = [sys.executable, "-W", "ignore", os.path.abspath(__file__), "--fsdp2-worker", out,
           "--schedule", args.schedule, "--steps", str(steps), "--warmup",
           str(warmup), "--port", str(free_port())]
    if args.offload:
        cmd.append("--offload")
    if profile:
        cmd += ["--profile", profile]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"FSDP2 failed ({p.returncode}):\n{p.stdout}{p.stderr[-4000:]}")
    with open(out) as f:
        return json.load(f)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def summarize(side, warmup, flops, peak):
    timed = side["rows"][warmup:]
    seconds = sum(r["step_time_s"] for r in timed)
    tokens = sum(r["tokens"] for r in timed)
    side["tokens_per_s"] = tokens / seconds
    side["median_step_s"] = statistics.median(r["step_time_s"] for r in timed)
    side["mfu"] = side["tokens_per_s"] * flops / (peak * 1e12) if peak else None
    side["loss_first"], side["loss_last"] = side["rows"][0]["loss"], side["rows"][-1]["loss"]
    return side


def predictions(schedule_path):
    """planc's predicted step time and peaks of the schedule's plan, from the report that
    make-gpu-scheds.sh writes beside it (None where there is none)."""
    path = schedule_path + ".report.json"
    if not os.path.exists(path):
        return None
    with open(path) as f:
        report = json.load(f)
    memory = report["memory"]
    device = memory["device"]["peak_bytes"]
    return dict(step_s=report["time"]["step_s"], device_peak_bytes=device,
                peak_bytes=device + memory["host"]["peak_bytes"])


def profile(args, work, host_arenas, with_fsdp2):
    """Traces of one more step of each side, and where their GPU time goes."""
    import profile_summary
    os.makedirs(args.profile, exist_ok=True)
    traces = [("plan-run", os.path.join(args.profile, "plan-run.json"))]
    run_plan_run(args, work, host_arenas, profile=traces[0][1])
    if with_fsdp2:
        traces.append(("FSDP2", os.path.join(args.profile, "fsdp2.json")))
        run_fsdp2(args, work, profile=traces[1][1])
    for label, path in traces:
        print(f"\n== profile of {label}'s step {PROFILE_STEPS} ({path})", flush=True)
        subprocess.run([sys.executable, profile_summary.__file__, path,
                        "--json", path.replace(".json", ".summary.json")])


def fmt_mfu(x):
    return f"{100 * x:.1f}%" if x is not None else "n/a"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plan-run")
    ap.add_argument("--schedule")
    ap.add_argument("--offload", action="store_true",
                    help="FSDP2 with CPUOffloadPolicy (the schedule offloads too)")
    ap.add_argument("--steps", type=int, help="steps per side (default 20; 6 with --offload)")
    ap.add_argument("--warmup", type=int,
                    help="untimed first steps (default 5; 2 with --offload)")
    ap.add_argument("--peak-tflops", type=float, help="dense bf16 peak of the device")
    ap.add_argument("--json", help="write the numbers to this file")
    ap.add_argument("--profile", metavar="DIR",
                    help="after the timed runs, run each side again for 3 steps and write "
                    "a trace of its last step to DIR/plan-run.json and DIR/fsdp2.json, "
                    "summarized by profile_summary.py")
    ap.add_argument("--fsdp2-worker", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=29500, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.steps is None:
        args.steps = 6 if args.offload else 20
    if args.warmup is None:
        args.warmup = 2 if args.offload else 5
    if args.warmup >= args.steps:
        ap.error("--warmup must be smaller than --steps")
    if args.fsdp2_worker:
        fsdp2_worker(args)
        return 0
    if not args.plan_run or not args.schedule:
        ap.error("--plan-run and --schedule are required")

    torch = import_torch()
    if not torch.cuda.is_available():
        print("skipped: no CUDA device")
        return 0

    schedule = rb.read_schedule(args.schedule)
    if schedule["mesh"]["replicate"] * schedule["mesh"]["shard"] != 1:
        raise SystemExit(f"gpu_vs_fsdp2.py: {args.schedule}: not a one-GPU schedule")
    cfg = model_config(schedule)
    train = schedule["train"]
    arenas = schedule["arena_bytes"]
    plan_host = arenas.get("pinned_host", 0) + arenas.get("host", 0)
    n_params = parameter_count(cfg)
    # CPUOffloadPolicy keeps fp32 parameters, gradients and both AdamW moments on the host.
    fsdp2_host = 16 * n_params if args.offload else 0
    host = host_memory_bytes()
    margin = 8 * GIB  # the processes themselves, the page cache, the driver
    name = torch.cuda.get_device_name(0)
    peak = peak_tflops(name, args.peak_tflops)
    flops = flops_per_token(cfg, train["seq_len"])
    tokens_per_step = train["micro_batch"] * train["seq_len"] * train["grad_accum"]
    print(f"device: {name}, dense bf16 peak "
          f"{f'{peak:.0f} TFLOP/s' if peak else 'unknown (pass --peak-tflops)'}; "
          f"host memory {host / GIB:.0f} GiB")
    print(f"model: {schedule['model'].get('preset', 'llama')} ({n_params / 1e9:.2f} B "
          f"parameters, {cfg['layers']} layers, hidden {cfg['hidden']}), "
          f"{train['precision']}, {tokens_per_step} tokens/step "
          f"({train['micro_batch']} x {train['seq_len']} x {train['grad_accum']}), "
          f"checkpointing {train['activation_checkpointing']}, "
          f"{args.steps} steps ({args.warmup} warmup); {flops / 1e9:.2f} GFLOP/token")
    if plan_host + margin > host:
        print(f"skipped: {os.path.basename(args.schedule)} needs "
              f"{plan_host / GIB:.0f} GiB of host memory, this machine has "
              f"{host / GIB:.0f} GiB")
        return SKIP_CODE

    work = tempfile.mkdtemp(prefix="plan-gpu-bench-")
    ours = summarize(run_plan_run(args, work, plan_host), args.warmup, flops, peak)
    theirs = None
    if fsdp2_host + margin > host:
        print(f"FSDP2 not run: CPUOffloadPolicy needs ~{fsdp2_host / GIB:.0f} GiB of host "
              f"memory (fp32 parameters, gradients, AdamW state), this machine has "
              f"{host / GIB:.0f} GiB")
    else:
        theirs = summarize(run_fsdp2(args, work), args.warmup, flops, peak)

    print()
    print(f"{'':24}{'tokens/s':>12}{'step (median)':>15}{'MFU':>8}{'device peak':>14}"
          f"{'loss first -> last':>22}")
    planned = ours.get("planned_bytes")
    rows = [("plan-run --backend cuda", ours)]
    if theirs:
        label = "FSDP2" + (" + CPUOffload" if args.offload else "")
        rows.append((label, theirs))
    for label, side in rows:
        print(f"{label:24}{side['tokens_per_s']:12.0f}{side['median_step_s']:13.3f} s"
              f"{fmt_mfu(side['mfu']):>8}{side['peak_bytes'] / GIB:10.2f} GiB"
              f"{side['loss_first']:12.4f} -> {side['loss_last']:.4f}")
    if planned:
        print(f"plan-run memory, device + host arenas: measured "
              f"{ours['peak_with_host_bytes'] / GIB:.2f} GiB, planned {planned / GIB:.2f} GiB "
              f"({100 * (ours['peak_with_host_bytes'] / planned - 1):+.2f}%); host arenas "
              f"{plan_host / GIB:.2f} GiB")
    predicted = predictions(args.schedule)
    if predicted:
        step_ratio = predicted["step_s"] / ours["median_step_s"]
        print(f"predicted vs measured (planc's report): step {predicted['step_s']:.3f} s vs "
              f"{ours['median_step_s']:.3f} s (predicted / measured {step_ratio:.2f}); peak "
              f"{predicted['peak_bytes'] / GIB:.2f} GiB vs {ours['peak_with_host_bytes'] / GIB:.2f}"
              f" GiB (device {predicted['device_peak_bytes'] / GIB:.2f} GiB vs "
              f"{ours['peak_bytes'] / GIB:.2f} GiB)")
        ours["predicted"] = dict(predicted, step_ratio=step_ratio)
    if theirs:
        print(f"FSDP2 model: {theirs['model_source']}, AdamW {theirs['optimizer']}")
    verdict = {}
    if theirs:
        ratio = ours["tokens_per_s"] / theirs["tokens_per_s"]
        goal = GOAL_OFFLOAD_RATIO if args.offload else GOAL_TOKENS_RATIO
        verdict["tokens_ratio"] = ratio
        print(f"tokens/s plan-run / FSDP2: {ratio:.2f}x (goal >= {goal:g}x: "
              f"{'met' if ratio >= goal else 'NOT met'})")
        print(f"device peak plan-run / FSDP2: "
              f"{ours['peak_bytes'] / theirs['peak_bytes']:.2f}x")
    if not args.offload and ours["mfu"] is not None:
        print(f"plan-run MFU {fmt_mfu(ours['mfu'])} (goal >= {100 * GOAL_MFU:.0f}%: "
              f"{'met' if ours['mfu'] >= GOAL_MFU else 'NOT met'})")
    if args.profile:
        profile(args, work, plan_host, theirs is not None)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=name, peak_tflops=peak, schedule=args.schedule,
                           offload=args.offload, parameters=n_params,
                           flops_per_token=flops, plan_run=ours, fsdp2=theirs,
                           **verdict), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
