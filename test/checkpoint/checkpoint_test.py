#!/usr/bin/env python3
"""Checkpoints keep their promises (docs/checkpoints.md), end to end with plan-run.

Every case compiles the tiny example plan with planc (--set overrides), runs plan-run with
local ranks on synthetic data, and compares the per-step metrics (--metrics JSONL; numbers
are written in shortest round-trip form, so == below is bitwise on the doubles):

  resume:     a run stopped after step 4 (final checkpoint) and resumed to step 6 gives
              bitwise the losses, gradient norms and loss scales of an uninterrupted run,
              for fp32 / bf16_mixed / fp16_mixed (dynamic loss scale, short growth
              interval: the scale grows between steps 5 and 6 only if the saved growth
              counter came back), AdamW / SGD with momentum, sharded / unsharded / offloaded state,
              gradient accumulation and clipping. The resumed run's metrics file keeps
              steps 1-4 and continues.
  reshard:    a checkpoint saved by 4 ranks with full_shard resumes on 2 ranks
              (full_shard, and no_shard) and one saved by full_shard resumes with
              no_shard on as many ranks; steps 5-6 match the uninterrupted 4-rank run
              within fp32 tolerance (1e-5 relative), the same global batch throughout.
  crash:      rank 1 dies in the middle of writing the step-4 checkpoint
              (PLAN_RUN_FAULT kind=save): the run fails, step 2 is still the newest
              complete checkpoint, plan-checkpoint verify passes on it, and
              --resume auto continues from it bitwise.
  sigterm:    SIGTERM (and SIGINT) to a running job: every rank stops after the same
              step, a checkpoint of that step is written, the exit code is 0 within a
              bound, and resuming from it is bitwise identical to an uninterrupted run.
  export:     plan-checkpoint export writes model.safetensors + config.json whose
              tensors are bitwise the checkpoint's fp32 master weights (checked here by
              reading the files directly), which `plan-run --init` loads back exactly:
              one step at lr = 1e-30 (too small to move any weight) from them,
              checkpointed and exported again, gives a byte-identical model.safetensors.
  keep:       --keep 2 leaves only the two newest checkpoints.
  lora:       a LoRA run's checkpoint holds the adapters and their state, names its frozen
              base (the seed, or the --init weights), resumes bitwise and on another mesh;
              export refuses a plain model, --adapter writes PEFT's adapter files, --merged
              the base with W + B A alpha/r, and PEFT (where installed) loading the adapter
              onto the base computes the merged model's logits. QLoRA (an NF4 base) resumes
              bitwise, and --merged merges into the base it computed with: NF4(W) + B A alpha/r.

The script prints one line per case and ends with `N passed, N failed`.

usage: checkpoint_test.py --planc P --plan-run R --plan-checkpoint C --plan PLAN [--work DIR]
"""
import argparse
import re
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import warnings

# torch without numpy warns on import; nothing here needs numpy.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

SEQ_LEN = 32
GLOBAL_BATCH = 8
FP32_RTOL = 1e-5


class Failure(Exception):
    pass


class Runner:
    def __init__(self, args, work):
        self.args = args
        self.work = work

    def compile(self, tag, world, sets):
        sched = os.path.join(self.work, tag + ".sched")
        cmd = [self.args.planc, self.args.plan, "-o", sched,
               "--set", f"train.seq_len={SEQ_LEN}", "--set", "train.steps=10",
               "--set", "cluster.nodes=1", "--set", f"cluster.gpus_per_node={world}"]
        for s in sets:
            cmd += ["--set", s]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise Failure(f"planc failed: {' '.join(cmd)}\n{p.stdout}{p.stderr}")
        return sched

    def run(self, sched, world, extra, expect=0, env=None, timeout=600):
        cmd = [self.args.plan_run, "--nproc", str(world), sched, "--data", "synthetic",
               "--quiet", "--timeout", "60"] + extra
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, **(env or {})))
        if p.returncode != expect:
            raise Failure(f"plan-run exited {p.returncode}, expected {expect}: {' '.join(cmd)}\n"
                          f"{p.stdout}{p.stderr}")
        return p

    def tool(self, *argv, expect=0):
        p = subprocess.run([self.args.plan_checkpoint, *argv], capture_output=True, text=True)
        if p.returncode != expect:
            raise Failure(f"plan-checkpoint {' '.join(argv)} exited {p.returncode}\n{p.stdout}{p.stderr}")
        return p


def metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def fresh(path):
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)
    return path


def step_dirs(root):
    return sorted(d for d in os.listdir(root) if d.startswith("step-"))


KEYS = ("loss", "grad_norm", "lr", "loss_scale", "skipped", "tokens")


def same_bitwise(got, want, steps):
    """got/want: metrics lists; compares the records of `steps` field by field."""
    g = {m["step"]: m for m in got}
    w = {m["step"]: m for m in want}
    for s in steps:
        if s not in g or s not in w:
            raise Failure(f"step {s} missing (got steps {sorted(g)}, reference {sorted(w)})")
        for k in KEYS:
            if g[s].get(k) != w[s].get(k):
                raise Failure(f"step {s}: {k} = {g[s].get(k)!r}, uninterrupted run has {w[s].get(k)!r}")


def close(got, want, steps, rtol):
    g = {m["step"]: m for m in got}
    w = {m["step"]: m for m in want}
    worst = 0.0
    for s in steps:
        if s not in g:
            raise Failure(f"step {s} missing (got steps {sorted(g)})")
        rel = abs(g[s]["loss"] - w[s]["loss"]) / abs(w[s]["loss"])
        worst = max(worst, rel)
        if rel > rtol:
            raise Failure(f"step {s}: loss {g[s]['loss']!r} vs {w[s]['loss']!r}: rel {rel:.2e} > {rtol:.0e}")
    return worst


def batch_sets(world, accum=1):
    return [f"train.micro_batch={GLOBAL_BATCH // (world * accum)}", f"train.grad_accum={accum}"]


# name: (world, planc --set overrides)
RESUME_CASES = {
    "fp32 full_shard adamw cosine": (2, ["parallel.sharding=full_shard"]),
    "bf16 zero1 accum 2 clip": (2, ["parallel.sharding=zero1", "train.precision=bf16_mixed",
                                    "train.grad_clip=0.5"], 2),
    "fp16 no_shard dynamic loss scale": (2, ["parallel.sharding=no_shard", "train.precision=fp16_mixed",
                                             "train.loss_scale=dynamic(initial = 1024, growth_interval = 5)"]),
    "gpt2 sgd momentum shard_grad_op offload": (2, ["model=gpt2_tiny", "parallel.sharding=shard_grad_op",
                                                    "train.optimizer=sgd(lr = 0.05, momentum = 0.9)",
                                                    "parallel.offload.optimizer=cpu",
                                                    "parallel.optimizer_step=cpu",
                                                    "parallel.offload.grads=cpu"]),
    "bf16 full_shard world 1": (1, ["parallel.sharding=full_shard", "train.precision=bf16_mixed"]),
    # The checkpoint holds the adapters and their state; the resume rebuilds the
    # frozen base from the seed it names. Dropout masks are drawn by global
    # sequence, so the resumed steps draw the uninterrupted run's.
    "lora full_shard dropout": (2, ["parallel.sharding=full_shard", "model.lora.rank=4",
                                    "model.lora.alpha=16", "model.lora.targets=[all_linear]",
                                    "model.lora.dropout=0.1"]),
    # QLoRA: the resume quantizes the rebuilt base again, to the same bytes.
    "qlora full_shard bf16": (2, ["parallel.sharding=full_shard", "model.lora.rank=4",
                                  "model.lora.alpha=16", "model.lora.targets=[all_linear]",
                                  "model.base=nf4", "train.precision=bf16_mixed"]),
}

LORA_SETS = ["model.lora.rank=4", "model.lora.alpha=16", "model.lora.targets=[all_linear]"]


def case_resume(r, name, spec):
    world, sets = spec[0], spec[1]
    accum = spec[2] if len(spec) > 2 else 1
    tag = "resume-" + name.replace(" ", "-")
    sched = r.compile(tag, world, sets + batch_sets(world, accum))
    ref = fresh(os.path.join(r.work, tag + "-ref.jsonl"))
    r.run(sched, world, ["--steps", "6", "--metrics", ref])
    root = fresh(os.path.join(r.work, tag + "-ckpt"))
    got = fresh(os.path.join(r.work, tag + ".jsonl"))
    r.run(sched, world, ["--steps", "4", "--metrics", got, "--checkpoint-dir", root])
    if step_dirs(root) != ["step-00000004"]:
        raise Failure(f"expected one final checkpoint, found {step_dirs(root)}")
    r.run(sched, world, ["--steps", "6", "--metrics", got, "--resume", root, "--checkpoint-dir", root])
    m = metrics(got)
    if [x["step"] for x in m] != [1, 2, 3, 4, 5, 6]:
        raise Failure(f"metrics after resume hold steps {[x['step'] for x in m]}, expected 1..6")
    same_bitwise(m, metrics(ref), range(1, 7))
    scales = [x.get("loss_scale") for x in m]
    if "loss scale" in name and not (scales[4] == scales[3] and scales[5] == 2 * scales[4]):
        raise Failure(f"the loss scale should grow after step 5 (growth_interval 5): {scales}")
    return f"steps 5-6 bitwise, loss {m[0]['loss']:.4f} -> {m[-1]['loss']:.4f}"


def case_reshard(r):
    src = r.compile("reshard-w4", 4, ["parallel.sharding=full_shard"] + batch_sets(4))
    ref = fresh(os.path.join(r.work, "reshard-ref.jsonl"))
    root = fresh(os.path.join(r.work, "reshard-ckpt"))
    r.run(src, 4, ["--steps", "6", "--metrics", ref, "--checkpoint-dir", root, "--checkpoint-every", "4"])
    ckpt = os.path.join(root, "step-00000004")
    notes = []
    for tag, world, sets in (("4->2 full_shard", 2, ["parallel.sharding=full_shard"] + batch_sets(2)),
                             ("4->2 no_shard", 2, ["parallel.sharding=no_shard"] + batch_sets(2, 2)),
                             ("full_shard->no_shard w4", 4, ["parallel.sharding=no_shard"] + batch_sets(4)),
                             ("4->1 zero1 offload", 1, ["parallel.sharding=zero1", "parallel.offload.optimizer=cpu",
                                                        "parallel.optimizer_step=cpu"] + batch_sets(1, 2))):
        dst = r.compile("reshard-" + tag.replace(" ", "-").replace(">", ""), world, sets)
        out = fresh(os.path.join(r.work, "reshard-" + tag.replace(" ", "_").replace(">", "") + ".jsonl"))
        r.run(dst, world, ["--steps", "6", "--metrics", out, "--resume", ckpt])
        got = metrics(out)
        if [x["step"] for x in got] != [5, 6]:
            raise Failure(f"{tag}: metrics hold steps {[x['step'] for x in got]}, expected 5, 6")
        w = close(got, metrics(ref), (5, 6), FP32_RTOL)
        notes.append(f"{tag} {w:.1e}")
    return "max rel diff " + ", ".join(notes)


def case_crash(r):
    sched = r.compile("crash", 2, ["parallel.sharding=full_shard"] + batch_sets(2))
    ref = fresh(os.path.join(r.work, "crash-ref.jsonl"))
    r.run(sched, 2, ["--steps", "6", "--metrics", ref])
    root = fresh(os.path.join(r.work, "crash-ckpt"))
    out = fresh(os.path.join(r.work, "crash.jsonl"))
    r.run(sched, 2, ["--steps", "6", "--metrics", out, "--checkpoint-dir", root, "--checkpoint-every", "2"],
              expect=3, env={"PLAN_RUN_FAULT": "rank=1,step=4,kind=save"})
    complete = [d for d in step_dirs(root) if os.path.exists(os.path.join(root, d, "checkpoint.json"))]
    if complete != ["step-00000002"]:
        raise Failure(f"after the crash, complete checkpoints are {complete} "
                      f"(directory holds {sorted(os.listdir(root))})")
    r.tool("verify", root)
    info = r.tool("info", root).stdout
    if not re.search(r"^step:\s+2$", info, re.M):
        raise Failure(f"plan-checkpoint info does not name step 2:\n{info}")
    r.run(sched, 2, ["--steps", "6", "--metrics", out, "--checkpoint-dir", root, "--resume", "auto"])
    m = metrics(out)
    if [x["step"] for x in m] != [1, 2, 3, 4, 5, 6]:
        raise Failure(f"metrics after resume hold steps {[x['step'] for x in m]}")
    same_bitwise(m, metrics(ref), range(1, 7))
    if step_dirs(root)[-1] != "step-00000006" or any(d.startswith(".") for d in os.listdir(root)):
        raise Failure(f"after the resumed run the directory holds {sorted(os.listdir(root))}")
    return "step 2 survived the crash; steps 3-6 bitwise after --resume auto"


def case_signal(r, sig, world):
    sched = r.compile(f"signal-{sig.name}-w{world}", world, ["parallel.sharding=full_shard"] + batch_sets(world))
    root = fresh(os.path.join(r.work, f"signal-{sig.name}-w{world}-ckpt"))
    out = fresh(os.path.join(r.work, f"signal-{sig.name}-w{world}.jsonl"))
    # train.steps = 10 fixes the learning-rate schedule; --steps only sets how long to run.
    cmd = [r.args.plan_run, sched, "--data", "synthetic", "--quiet", "--timeout", "60",
           "--steps", "100000", "--metrics", out, "--checkpoint-dir", root, "--stop-timeout", "60"]
    if world > 1:
        cmd[1:1] = ["--nproc", str(world)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if os.path.exists(out) and len(metrics(out)) >= 3:
            break
        time.sleep(0.05)
    if proc.poll() is not None:
        raise Failure(f"the run ended before the signal: {proc.communicate()[0]}")
    sent = time.time()
    proc.send_signal(sig)
    try:
        output, _ = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise Failure(f"no exit within 90 s of {sig.name}")
    took = time.time() - sent
    if proc.returncode != 0:
        raise Failure(f"exit code {proc.returncode} after {sig.name}:\n{output}")
    m = metrics(out)
    last = m[-1]["step"]
    dirs = step_dirs(root)
    if dirs != [f"step-{last:08d}"]:
        raise Failure(f"last metrics step {last}, checkpoints {dirs}:\n{output}")
    if "stopped after step" not in output:
        raise Failure(f"no stop message:\n{output}")
    ref = fresh(os.path.join(r.work, f"signal-{sig.name}-w{world}-ref.jsonl"))
    r.run(sched, world, ["--steps", str(last + 2), "--metrics", ref])
    r.run(sched, world, ["--steps", str(last + 2), "--metrics", out, "--resume", root])
    same_bitwise(metrics(out), metrics(ref), range(1, last + 3))
    return f"stopped after step {last}, exit 0 {took:.1f} s after the signal; steps {last + 1}-{last + 2} bitwise"


def read_safetensors(path):
    import torch
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    dtypes = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = (torch.frombuffer(bytearray(data[a:b]), dtype=dtypes[t["dtype"]]).reshape(t["shape"]), t)
    return header, out


def case_export(r):
    import torch
    sched = r.compile("export", 2, ["parallel.sharding=full_shard"] + batch_sets(2))
    root = fresh(os.path.join(r.work, "export-ckpt"))
    r.run(sched, 2, ["--steps", "3", "--checkpoint-dir", root])
    hf = fresh(os.path.join(r.work, "export-hf"))
    r.tool("export", root, "-o", hf)
    cfg = json.load(open(os.path.join(hf, "config.json")))
    if cfg.get("model_type") != "llama" or cfg.get("architectures") != ["LlamaForCausalLM"]:
        raise Failure(f"config.json: {cfg}")
    _, tensors = read_safetensors(os.path.join(hf, "model.safetensors"))
    # The checkpoint's fp32 master shards, reassembled by hand from checkpoint.json.
    ckdir = os.path.join(root, "step-00000003")
    meta = json.load(open(os.path.join(ckdir, "checkpoint.json")))
    shards = {}
    for f in meta["files"]:
        _, ts = read_safetensors(os.path.join(ckdir, f["file"]))
        shards.update({(f["rank"], k): v[0] for k, v in ts.items()})
    count = 0
    for g in meta["groups"]:
        parts = sorted((t for t in meta["tensors"] if t["group"] == g["name"] and t["role"] in ("master", "param")
                        and t["dtype"] == "f32"), key=lambda t: t.get("shard_index", 0))
        if not parts:
            continue
        role = "master" if any(t["role"] == "master" for t in parts) else "param"
        flat = torch.cat([shards[(t["rank"], t["name"])].flatten() for t in parts if t["role"] == role])
        offset = 0
        for uname in g["units"]:
            unit = next(u for u in meta["units"] if u["name"] == uname)
            for p in unit["params"]:
                if p.get("tied_to"):
                    continue
                numel = 1
                for d in p["shape"]:
                    numel *= d
                want = flat[offset + p["offset"]: offset + p["offset"] + numel].reshape(p["shape"])
                got = tensors[p["name"]][0]
                if not torch.equal(got, want) or got.dtype != torch.float32:
                    raise Failure(f"exported {p['name']} differs from the checkpoint's master")
                count += 1
            offset += unit["numel"]
    if count != len(tensors):
        raise Failure(f"checked {count} tensors, the export has {len(tensors)}")
    # --init loads it exactly: one step at lr = 1e-30 (the plan language wants lr > 0) moves
    # no fp32 weight of this size (|w| >> 1e-23), so re-exporting must give the same bytes.
    zero = r.compile("export-lr0", 2, ["parallel.sharding=no_shard", "train.optimizer=adamw(lr = 1e-30)",
                                       "train.lr_schedule=constant"] + batch_sets(2))
    root2 = fresh(os.path.join(r.work, "export-ckpt2"))
    r.run(zero, 2, ["--steps", "1", "--init", hf, "--checkpoint-dir", root2])
    hf2 = fresh(os.path.join(r.work, "export-hf2"))
    r.tool("export", root2, "-o", hf2)
    if open(os.path.join(hf, "model.safetensors"), "rb").read() != open(os.path.join(hf2, "model.safetensors"), "rb").read():
        raise Failure("exported -> --init -> exported again is not byte-identical")
    extra = ""
    try:
        import transformers  # noqa: F401
        model = transformers.AutoModelForCausalLM.from_pretrained(hf)
        extra = f"; transformers loads it ({sum(p.numel() for p in model.parameters())} parameters)"
    except ImportError:
        extra = "; transformers not installed, from_pretrained not tried"
    return f"{count} tensors bitwise the master; --init round trip byte-identical{extra}"


def case_lora_reshard(r):
    """A LoRA checkpoint: only what trains (the adapters), its base named, and a resume
    on another mesh within fp32 tolerance."""
    src = r.compile("lora-w2", 2, ["parallel.sharding=full_shard"] + LORA_SETS + batch_sets(2))
    ref = fresh(os.path.join(r.work, "lora-ref.jsonl"))
    root = fresh(os.path.join(r.work, "lora-ckpt"))
    r.run(src, 2, ["--steps", "6", "--metrics", ref, "--checkpoint-dir", root, "--checkpoint-every", "4"])
    ckpt = os.path.join(root, "step-00000004")
    meta = json.load(open(os.path.join(ckpt, "checkpoint.json")))
    if meta.get("base") != "seed":
        raise Failure(f"checkpoint.json's base is {meta.get('base')!r}, expected 'seed'")
    roles = {t["role"] for t in meta["tensors"]}
    adapters = sum(1 for u in meta["units"] for p in u["params"] if not p["frozen"])
    if "frozen" in roles or sum(u["numel"] for u in meta["units"]) == 0:
        raise Failure(f"the checkpoint holds roles {sorted(roles)}")
    dst = r.compile("lora-w1", 1, ["parallel.sharding=no_shard"] + LORA_SETS + batch_sets(1, 2))
    out = fresh(os.path.join(r.work, "lora-w1.jsonl"))
    r.run(dst, 1, ["--steps", "6", "--metrics", out, "--resume", ckpt])
    w = close(metrics(out), metrics(ref), (5, 6), FP32_RTOL)
    size = sum(f["bytes"] for f in meta["files"])
    return (f"{adapters} adapter tensors and their AdamW state, {size} bytes; "
            f"2 ranks full_shard -> 1 rank no_shard: max rel diff {w:.1e}")


def case_lora_export(r):
    """A LoRA run on a base from --init (an exported full model): resume bitwise with the
    base read again from that path; export refuses a plain model, --adapter writes PEFT's
    files, --merged the base with W + B A alpha/r, which PEFT (where installed) agrees with."""
    import torch
    full = r.compile("lora-base", 2, ["parallel.sharding=no_shard"] + batch_sets(2))
    root = fresh(os.path.join(r.work, "lora-base-ckpt"))
    r.run(full, 2, ["--steps", "2", "--checkpoint-dir", root])
    base = fresh(os.path.join(r.work, "lora-base-hf"))
    r.tool("export", root, "-o", base)
    sched = r.compile("lora-init", 2, ["parallel.sharding=full_shard"] + LORA_SETS + batch_sets(2))
    ref = fresh(os.path.join(r.work, "lora-init-ref.jsonl"))
    r.run(sched, 2, ["--steps", "4", "--init", base, "--metrics", ref])
    ck = fresh(os.path.join(r.work, "lora-init-ckpt"))
    got = fresh(os.path.join(r.work, "lora-init.jsonl"))
    r.run(sched, 2, ["--steps", "2", "--init", base, "--metrics", got, "--checkpoint-dir", ck])
    meta = json.load(open(os.path.join(ck, "step-00000002", "checkpoint.json")))
    if meta.get("base") != os.path.abspath(base):
        raise Failure(f"checkpoint.json's base is {meta.get('base')!r}, expected {os.path.abspath(base)!r}")
    r.run(sched, 2, ["--steps", "4", "--resume", ck, "--metrics", got])
    same_bitwise(metrics(got), metrics(ref), range(1, 5))

    p = r.tool("export", ck, "-o", fresh(os.path.join(r.work, "lora-plain")), expect=1)
    if "--adapter" not in p.stderr or "--merged" not in p.stderr:
        raise Failure(f"a plain export of a LoRA checkpoint: {p.stderr}")
    adapter = fresh(os.path.join(r.work, "lora-adapter"))
    r.tool("export", ck, "-o", adapter, "--adapter")
    merged = fresh(os.path.join(r.work, "lora-merged"))
    r.tool("export", ck, "-o", merged, "--merged")
    config = json.load(open(os.path.join(adapter, "adapter_config.json")))
    if (config["peft_type"], config["r"], config["lora_alpha"]) != ("LORA", 4, 16.0):
        raise Failure(f"adapter_config.json: {config}")
    _, lora = read_safetensors(os.path.join(adapter, "adapter_model.safetensors"))
    _, base_w = read_safetensors(os.path.join(base, "model.safetensors"))
    _, merged_w = read_safetensors(os.path.join(merged, "model.safetensors"))
    prefix = "base_model.model."
    modules = {k[len(prefix):-len(".lora_A.weight")] for k in lora if k.endswith(".lora_A.weight")}
    if not all(k.startswith(prefix) for k in lora) or set(config["target_modules"]) != modules:
        raise Failure(f"adapter names {sorted(lora)[:3]}..., targets {config['target_modules'][:3]}...")
    if set(merged_w) != set(base_w):
        raise Failure(f"the merged model has other tensors than the base: {sorted(set(merged_w) ^ set(base_w))}")
    worst = 0.0
    for name, (w, _) in merged_w.items():
        module = name[:-len(".weight")]
        want = base_w[name][0]
        if module in modules:
            a = lora[prefix + module + ".lora_A.weight"][0]
            b = lora[prefix + module + ".lora_B.weight"][0]
            want = want + (b @ a) * (16.0 / 4)
            worst = max(worst, float((w - want).abs().max() / want.abs().max()))
        elif not torch.equal(w, want):
            raise Failure(f"merged {name} is not the base's, and it has no adapter")
    if worst > 1e-6:
        raise Failure(f"merged weights differ from W + B A alpha/r by {worst:.1e}")
    try:
        import peft
        import transformers
    except ImportError:
        return (f"resume bitwise from the --init base; {len(modules)} adapted modules; merged = "
                f"W + B A alpha/r within {worst:.1e}; PEFT check skipped: peft is not installed")
    torch.manual_seed(0)
    tokens = torch.randint(0, 512, (2, SEQ_LEN))
    with torch.no_grad():
        plain = transformers.AutoModelForCausalLM.from_pretrained(base)
        before = plain(tokens).logits
        with_adapter = peft.PeftModel.from_pretrained(plain, adapter)
        via_peft = with_adapter(tokens).logits
        via_merged = transformers.AutoModelForCausalLM.from_pretrained(merged)(tokens).logits
    agree = float((via_peft - via_merged).abs().max() / via_merged.abs().max())
    moved = float((via_peft - before).abs().max() / before.abs().max())
    if agree > 1e-5 or moved < 1e-4:
        raise Failure(f"PEFT with the adapter vs the merged model: {agree:.1e} apart; "
                      f"the adapter moves the logits by {moved:.1e}")
    return (f"resume bitwise from the --init base; {len(modules)} adapted modules; merged = "
            f"W + B A alpha/r within {worst:.1e}; PEFT {peft.__version__} loads the adapter: "
            f"its logits match the merged model's within {agree:.1e} (the base's differ by "
            f"{moved:.1e})")


def case_qlora_merged(r):
    """A QLoRA run on a base from --init: --merged merges the adapters into the base the run
    computed with, each block's linear weight through NF4 (the reference's own NF4 round
    trip), every other weight as the base has it."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
    from llama_reference import nf4_round_trip
    import torch
    full = r.compile("qlora-base", 1, ["parallel.sharding=no_shard"] + batch_sets(1))
    root = fresh(os.path.join(r.work, "qlora-base-ckpt"))
    r.run(full, 1, ["--steps", "1", "--checkpoint-dir", root])
    base = fresh(os.path.join(r.work, "qlora-base-hf"))
    r.tool("export", root, "-o", base)
    sched = r.compile("qlora", 2, ["parallel.sharding=full_shard", "model.base=nf4"]
                      + LORA_SETS + batch_sets(2))
    ck = fresh(os.path.join(r.work, "qlora-ckpt"))
    r.run(sched, 2, ["--steps", "2", "--init", base, "--checkpoint-dir", ck])
    merged = fresh(os.path.join(r.work, "qlora-merged"))
    r.tool("export", ck, "-o", merged, "--merged")
    adapter = fresh(os.path.join(r.work, "qlora-adapter"))
    r.tool("export", ck, "-o", adapter, "--adapter")
    _, lora = read_safetensors(os.path.join(adapter, "adapter_model.safetensors"))
    _, base_w = read_safetensors(os.path.join(base, "model.safetensors"))
    _, merged_w = read_safetensors(os.path.join(merged, "model.safetensors"))
    prefix = "base_model.model."
    worst, quantized = 0.0, 0
    for name, (w, _) in merged_w.items():
        module = name[:-len(".weight")]
        want = base_w[name][0]
        if prefix + module + ".lora_A.weight" in lora:
            a = lora[prefix + module + ".lora_A.weight"][0]
            b = lora[prefix + module + ".lora_B.weight"][0]
            want = nf4_round_trip(want) + (b @ a) * (16.0 / 4)
            worst = max(worst, float((w - want).abs().max() / want.abs().max()))
            quantized += 1
        elif not torch.equal(w, want):
            raise Failure(f"merged {name} is not the base's, and it is no adapted linear weight")
    if quantized == 0 or worst > 1e-6:
        raise Failure(f"{quantized} merged linear weights, {worst:.1e} from NF4(W) + B A alpha/r")
    return (f"{quantized} linear weights merged as NF4(W) + B A alpha/r within {worst:.1e}, "
            f"the rest the base's")


def case_keep(r):
    sched = r.compile("keep", 2, ["parallel.sharding=zero1"] + batch_sets(2))
    root = fresh(os.path.join(r.work, "keep-ckpt"))
    r.run(sched, 2, ["--steps", "5", "--checkpoint-dir", root, "--checkpoint-every", "1", "--keep", "2"])
    if step_dirs(root) != ["step-00000004", "step-00000005"] or len(os.listdir(root)) != 2:
        raise Failure(f"--keep 2 left {sorted(os.listdir(root))}")
    sizes = sum(os.path.getsize(os.path.join(root, "step-00000005", f))
                for f in os.listdir(os.path.join(root, "step-00000005")))
    return f"2 newest kept; one checkpoint is {sizes} bytes"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--planc", required=True)
    ap.add_argument("--plan-run", required=True)
    ap.add_argument("--plan-checkpoint", required=True)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--work", default=None)
    ap.add_argument("--only", default=None, help="run only cases whose name contains this")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="plan-checkpoint-")
    os.makedirs(work, exist_ok=True)
    r = Runner(args, work)

    cases = [(f"resume: {n}", lambda n=n, s=s: case_resume(r, n, s)) for n, s in RESUME_CASES.items()]
    cases += [("reshard", lambda: case_reshard(r)),
              ("crash during save", lambda: case_crash(r)),
              ("SIGTERM, 2 ranks", lambda: case_signal(r, signal.SIGTERM, 2)),
              ("SIGINT, 1 rank", lambda: case_signal(r, signal.SIGINT, 1)),
              ("export round trip", lambda: case_export(r)),
              ("lora reshard", lambda: case_lora_reshard(r)),
              ("lora export", lambda: case_lora_export(r)),
              ("qlora merged", lambda: case_qlora_merged(r)),
              ("keep", lambda: case_keep(r))]
    passed = failed = 0
    for name, fn in cases:
        if args.only and args.only not in name:
            continue
        t0 = time.time()
        try:
            detail = fn()
            print(f"PASS {name}: {detail} ({time.time() - t0:.1f} s)", flush=True)
            passed += 1
        except Exception as e:  # one case's failure must not hide the others
            print(f"FAIL {name}: {e}", flush=True)
            failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
