#!/usr/bin/env python3
"""plan-run against PyTorch itself, step by step.

The same tiny Llama (and GPT-2), the same initial weights and the same synthetic tokens,
trained for STEPS steps twice:
  - by plan-run, from a schedule planc compiled (full_shard on 2 ranks, and no_shard on 1),
    with the runtime's own deterministic initialisation (seed 0);
  - by test/reference/llama_reference.py: a plain PyTorch model with HuggingFace's math and
    parameter names, the same initialisation (it reproduces the runtime's generator bit for
    bit; --dump-init also writes it as safetensors, which plan-run --init then loads for a
    third run to check --init), torch.optim.AdamW and HF's cosine schedule with warmup.
BERT's masked-LM, classification and regression heads too, each at one rank and over two
full_shard ranks (and from the reference's weights with --init). Also with weight decay, on the matrices only (the HF Trainer's parameter groups, the plan's
default) and on every parameter (`decay = all`, one param group), each against the reference
with the same groups. LoRA too (`model.lora`): rank-4 adapters on the frozen tiny Llama (its
default targets q_proj and v_proj, and all_linear) and GPT-2 (its default, c_attn), against
the reference's adapters (PEFT's: lora_A uniform(+-1/sqrt(in)) from the parameter's seed,
lora_B zero, y = M(x) + B(A(x)) * alpha / rank, only the adapters train), and QLoRA's NF4
base (model.base = nf4; the reference computes with its own NF4 round trip of the blocks'
linear weights); --lora=skip leaves
them out, --lora=only runs them alone. Every step's loss must agree within RTOL relative. Both run fp32 on the CPU with the same
kernels (LibTorch is PyTorch's C++ core); the differences are summation order (micro-batch
and rank splits, per-unit vs whole-model autograd), so 1e-5 leaves two orders of magnitude
of margin over fp32 roundoff accumulated over 10 steps.

With --transformers, the reference is transformers' own LlamaForCausalLM, GPT2LMHeadModel,
BertForMaskedLM and BertForSequenceClassification (one two-rank full_shard run per case), and
bert-base-cased comes in from a checkpoint laid out as the Hub's (bert_base_cased_from_hub_layout)
and goes out through plan-checkpoint export to transformers' from_pretrained.

Ends with `N passed, N failed`.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

RTOL = 1e-5
HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.join(HERE, "..", "reference", "llama_reference.py")

# examples/tiny_llama_cpu.plan's recipe: adamw(lr = 1e-3, weight_decay = 0),
# cosine(warmup = 2, min_lr_ratio = 0.1); here with 8 x 64 tokens per step.
MICRO_BATCH_TOTAL = 8
SEQ_LEN = 64


def losses_of(path):
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]


# Weight decay large enough (lr x decay = 1e-2 a step) that decaying the norm
# weights and biases too changes the losses far beyond RTOL.
WEIGHT_DECAY = 10.0

# LoRA's adapters: alpha / rank = 4, so that a runtime scaling by alpha alone
# or not at all shows. Cases: (model, targets (None: the family's default),
# weight decay (0: none; else on the matrices, the adapters), [(world, sharding)]).
LORA_RANK = 4
LORA_ALPHA = 16
LORA_RUNS = [(1, "no_shard"), (2, "full_shard")]
LORA_CASES = [
    ("llama_tiny", None, 0.0, LORA_RUNS),
    ("llama_tiny", "all_linear", 0.0, LORA_RUNS),
    ("gpt2_tiny", None, 0.0, LORA_RUNS),
    # BERT's masked-LM head (its masking as above), adapters on every linear.
    ("bert_tiny", "all_linear", 0.0, [(2, "full_shard")]),
    # The adapters decay; the frozen base must not.
    ("llama_tiny", None, WEIGHT_DECAY, [(2, "full_shard")]),
    # QLoRA: the blocks' linear weights stored in NF4, computed with
    # dequantized (the reference quantizes them with its own NF4).
    ("llama_tiny", "all_linear nf4", 0.0, LORA_RUNS),
    ("gpt2_tiny", "default nf4", 0.0, [(2, "full_shard")]),
    # LoRA dropout: masks drawn per sequence and module, the same on any
    # rank and micro-batch split; with activation checkpointing the
    # recompute draws them again.
    ("llama_tiny", "all_linear drop", 0.0, LORA_RUNS + [(2, "full_shard ckpt")]),
    ("gpt2_tiny", "default drop", 0.0, [(2, "full_shard")]),
    ("bert_tiny", "all_linear drop", 0.0, [(2, "full_shard")]),
]
LORA_DROPOUT = 0.1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--planc", required=True)
    ap.add_argument("--plan-run", required=True)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--plan-checkpoint", help="with --transformers: exports the trained "
                    "bert-base-cased for transformers to load")
    ap.add_argument("--transformers", action="store_true",
                    help="against transformers' own classes instead (fewer cases), and "
                         "bert-base-cased from a Hub-layout checkpoint; exits 77 (skipped) "
                         "without transformers")
    ap.add_argument("--lora", choices=["include", "skip", "only"], default="include",
                    help="the LoRA cases: with the others (default), left out, or alone")
    args = ap.parse_args()
    if args.transformers:
        try:
            import transformers  # noqa: F401
        except ImportError:
            print("skipped: transformers is not installed")
            return 77
        if not args.plan_checkpoint:
            ap.error("--transformers needs --plan-checkpoint")
    # With --transformers: the reference is transformers' model, and one
    # sharded run per case stands for the matrix (the plain reference's runs
    # cover the others, and the two references agree).
    ref_flags = ["--transformers"] if args.transformers else []
    work = tempfile.mkdtemp(prefix="plan-pytorch-ref-")
    passed = failed = 0

    def reference(model, name, extra, init=None, steps=None):
        out = os.path.join(work, f"{model}-{name}.jsonl")
        cmd = [sys.executable, "-W", "ignore", REFERENCE, "--model", model,
               "--init-seed", "0", "--data", "synthetic", "--seed", "0",
               "--steps", str(steps or args.steps), "--micro-batch", str(MICRO_BATCH_TOTAL),
               "--seq-len", str(SEQ_LEN), "--lr", "1e-3", "--lr-schedule", "cosine",
               "--warmup", "2", "--min-lr-ratio", "0.1"] + ref_flags + extra
        if init:
            cmd += ["--dump-init", init]
        with open(out, "w") as f:
            subprocess.run(cmd, check=True, stdout=f)
        return losses_of(out)

    def compare(tag, name, world, sets, init, ref, extra=(), steps=None):
        """plan-run with `sets` on `world` ranks (from `init` when given, with
        `extra` options) for `steps` (default --steps) against the
        reference's losses `ref`; True when every step agrees."""
        steps = steps or args.steps
        sched = os.path.join(work, f"{name}.sched")
        metrics = os.path.join(work, f"{name}-{bool(init)}.jsonl")
        cmd = [args.planc, args.plan, "-o", sched]
        for s in sets:
            cmd += ["--set", s]
        subprocess.run(cmd, check=True)
        cmd = [args.plan_run, "--nproc", str(world), sched, "--steps", str(steps),
               "--data", "synthetic", "--seed", "0", "--metrics", metrics, "--quiet"]
        if init:
            cmd += ["--init", init]
        cmd += list(extra)
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"FAIL {tag}: plan-run exited {p.returncode}\n{p.stdout}{p.stderr}")
            return False
        ours = losses_of(metrics)
        rel = max(abs(a - b) / abs(b) for a, b in zip(ours, ref))
        ok = len(ours) == len(ref) == steps and rel <= RTOL
        print(f"{'PASS' if ok else 'FAIL'} {tag}: max rel diff {rel:.2e} over {len(ours)} steps "
              f"(loss {ours[0]:.5f} -> {ours[-1]:.5f}; PyTorch {ref[0]:.5f} -> {ref[-1]:.5f})")
        if not ok:
            print(f"  plan-run: {ours}\n  PyTorch:  {ref}")
        return ok

    full_refs = {}  # model: the reference's losses with every parameter training
    for model in () if args.lora == "only" else ("llama_tiny", "gpt2_tiny"):
        init = os.path.join(work, f"{model}-init.safetensors")
        if args.transformers:
            ref = reference(model, "ref", [])
            ok = compare(f"{model} world=2 full_shard vs transformers", f"{model}-tf", 2,
                         [f"model={model}", f"train.seq_len={SEQ_LEN}",
                          f"train.micro_batch={MICRO_BATCH_TOTAL // 2}",
                          "parallel.sharding=full_shard", "cluster.gpus_per_node=2",
                          "train.steps=0"], None, ref)
            passed += ok
            failed += not ok
            continue
        refs = {
            "none": reference(model, "ref", [], init),
            # The HF Trainer's groups (no decay on 1-D parameters), and one
            # group, as torch.optim.AdamW(model.parameters()).
            "matrices": reference(model, "ref-matrices",
                                  ["--weight-decay", str(WEIGHT_DECAY), "--decay", "matrices"]),
            "all": reference(model, "ref-all",
                             ["--weight-decay", str(WEIGHT_DECAY), "--decay", "all"]),
        }
        full_refs[model] = refs["none"]
        # The check below can tell the two apart.
        apart = max(abs(a - b) / abs(b) for a, b in zip(refs["matrices"], refs["all"]))
        ok = apart > 100 * RTOL
        print(f"{'PASS' if ok else 'FAIL'} {model}: decay on matrices vs all differ by "
              f"{apart:.2e} (more than 100 x {RTOL:g})")
        passed += ok
        failed += not ok
        runs = [(1, "no_shard", False, "none"), (2, "full_shard", False, "none"),
                (2, "full_shard", True, "none"), (1, "no_shard", False, "matrices"),
                (2, "full_shard", False, "matrices"), (2, "full_shard", False, "all")]
        for world, sharding, use_init, decay in runs:
            tag = f"{model} world={world} {sharding}" + (" --init" if use_init else "")
            if decay != "none":
                tag += f" weight_decay={WEIGHT_DECAY:g} decay={decay}"
            sets = [f"model={model}", f"train.seq_len={SEQ_LEN}",
                    f"train.micro_batch={MICRO_BATCH_TOTAL // world}", f"parallel.sharding={sharding}",
                    f"cluster.gpus_per_node={world}", "train.steps=0"]
            if decay != "none":
                sets.append(f"train.optimizer=adamw(lr = 1e-3, weight_decay = {WEIGHT_DECAY}, "
                            f"decay = {decay})")
            ok = compare(tag, f"{model}-{world}-{sharding}-{decay}", world, sets,
                         init if use_init else None, refs[decay])
            passed += ok
            failed += not ok
    # BERT's three heads against BertForMaskedLM / BertForSequenceClassification
    # written with HF's math and names: masked-LM loss over HF's collator's
    # masking, divided by the step's masked positions; cross-entropy over 3
    # labels; MSE with one label (a regression).
    bert_heads = [] if args.lora == "only" else [
        ("masked_lm", {}, []),
        ("classification", {"head": "sequence_classification", "num_labels": 3},
         ["model.head=sequence_classification", "model.num_labels=3"]),
        ("regression", {"head": "sequence_classification", "num_labels": 1},
         ["model.head=sequence_classification", "model.num_labels=1"]),
    ]
    for head, config, head_sets in bert_heads:
        config_path = os.path.join(work, f"bert-{head}.json")
        with open(config_path, "w") as f:
            json.dump(config, f)
        init = os.path.join(work, f"bert-{head}-init.safetensors")
        ref = reference("bert_tiny", f"ref-{head}", ["--config", config_path],
                        None if args.transformers else init)
        runs = [(1, "no_shard", False), (2, "full_shard", False), (2, "full_shard", True)]
        for world, sharding, use_init in runs[1:2] if args.transformers else runs:
            tag = f"bert_tiny {head} world={world} {sharding}" + (" --init" if use_init else "")
            if args.transformers:
                tag += " vs transformers"
            sets = ["model=bert_tiny", f"train.seq_len={SEQ_LEN}",
                    f"train.micro_batch={MICRO_BATCH_TOTAL // world}",
                    f"parallel.sharding={sharding}", f"cluster.gpus_per_node={world}",
                    "train.steps=0"] + head_sets
            ok = compare(tag, f"bert-{head}-{world}-{sharding}", world, sets,
                         init if use_init else None, ref)
            passed += ok
            failed += not ok
    # LoRA: adapters on the frozen model, from the runtime's initialisation
    # (the base's as above; lora_A uniform, lora_B zero), the plan's recipe
    # otherwise. With --transformers the reference is transformers' model
    # with the same adapters (one sharded run per case).
    for model, targets, decay, runs in LORA_CASES if args.lora != "skip" else []:
        base, dropout = None, 0.0
        if targets and targets.endswith(" nf4"):
            targets, base = targets.removesuffix(" nf4"), "nf4"
            targets = None if targets == "default" else targets
        if targets and targets.endswith(" drop"):
            targets, dropout = targets.removesuffix(" drop"), LORA_DROPOUT
            targets = None if targets == "default" else targets
        label = ((targets or "default") + (f"-decay{decay:g}" if decay else "")
                 + (f"-{base}" if base else "") + (f"-drop{dropout:g}" if dropout else ""))
        lora_ref = ["--lora-rank", str(LORA_RANK), "--lora-alpha", f"{LORA_ALPHA:g}"]
        lora_sets = [f"model.lora.rank={LORA_RANK}", f"model.lora.alpha={LORA_ALPHA:g}"]
        if base:
            lora_ref += ["--lora-base", base]
            lora_sets.append(f"model.base={base}")
        if dropout:
            lora_ref += ["--lora-dropout", f"{dropout:g}"]
            lora_sets.append(f"model.lora.dropout={dropout:g}")
        if targets:
            lora_ref += ["--lora-targets", targets]
            lora_sets.append(f"model.lora.targets=[{targets}]")
        if decay:
            lora_ref += ["--weight-decay", str(decay), "--decay", "matrices"]
            lora_sets.append(f"train.optimizer=adamw(lr = 1e-3, weight_decay = {decay}, "
                             "decay = matrices)")
        ref = reference(model, f"ref-lora-{label}", lora_ref)
        if not args.transformers and not decay and not base and not dropout:
            # B = 0: the first step is the full model's to the bit; then
            # only the adapters move, so the curves part by far more than RTOL.
            if model not in full_refs:
                full_refs[model] = reference(model, "ref", [])
            full = full_refs[model]
            apart = max(abs(a - b) / abs(b) for a, b in zip(ref, full))
            ok = ref[0] == full[0] and apart > 100 * RTOL
            print(f"{'PASS' if ok else 'FAIL'} {model} LoRA targets={targets or 'default'}: "
                  f"step 1 equals the full model's ({ref[0]:.7f} vs {full[0]:.7f}), then "
                  f"they differ by {apart:.2e} (more than 100 x {RTOL:g})")
            passed += ok
            failed += not ok
        for world, sharding in runs[-1:] if args.transformers else runs:
            tag = (f"{model} {'QLoRA (nf4 base)' if base else 'LoRA'} r={LORA_RANK} "
                   f"alpha={LORA_ALPHA:g} targets={targets or 'default'} "
                   + (f"dropout={dropout:g} " if dropout else "")
                   + f"world={world} {sharding}")
            if decay:
                tag += f" weight_decay={decay:g} decay=matrices"
            if args.transformers:
                tag += " vs transformers"
            # "ckpt": activation checkpointing over 2 micro-batches a step.
            sharding, *how = sharding.split()
            accum = 2 if "ckpt" in how else 1
            sets = [f"model={model}", f"train.seq_len={SEQ_LEN}",
                    f"train.micro_batch={MICRO_BATCH_TOTAL // (world * accum)}",
                    f"train.grad_accum={accum}",
                    f"parallel.sharding={sharding}", f"cluster.gpus_per_node={world}",
                    "train.steps=0"] + lora_sets
            if accum > 1:
                sets.append("train.activation_checkpointing=full")
            ok = compare(tag, f"{model}-lora-{label}-{world}-{sharding}{'-ckpt' if how else ''}",
                         world, sets, None, ref)
            passed += ok
            failed += not ok
    if args.lora != "skip" and not args.transformers:
        # LoRA dropout over long rows: down_proj's input [256, 512] is drawn
        # in chunks of whole rows (kDropoutChunkElements = 2^16: 128 rows),
        # the reference's in one torch.rand call per sequence. Other masks
        # (or none) move the loss by 2e-5 from step 4 and 6e-5 from step 5.
        seq, inter = 256, 512
        config = os.path.join(work, f"intermediate-{inter}.json")
        with open(config, "w") as f:
            json.dump({"intermediate": inter}, f)
        extra = ["--lora-rank", str(LORA_RANK), "--lora-alpha", f"{LORA_ALPHA:g}",
                 "--lora-targets", "all_linear", "--lora-dropout", f"{LORA_DROPOUT:g}",
                 "--seq-len", str(seq), "--config", config]
        ref = reference("llama_tiny", "ref-lora-drop-chunked", extra)
        sets = ["model=llama_tiny", f"model.intermediate={inter}", f"train.seq_len={seq}",
                f"train.micro_batch={MICRO_BATCH_TOTAL // 2}", "parallel.sharding=full_shard",
                "cluster.gpus_per_node=2", "train.steps=0",
                f"model.lora.rank={LORA_RANK}", f"model.lora.alpha={LORA_ALPHA:g}",
                "model.lora.targets=[all_linear]", f"model.lora.dropout={LORA_DROPOUT:g}"]
        ok = compare(f"llama_tiny LoRA dropout={LORA_DROPOUT:g} intermediate={inter} "
                     f"seq_len={seq} (masks drawn in chunks) world=2 full_shard",
                     "llama_tiny-lora-drop-chunked", 2, sets, None, ref)
        passed += ok
        failed += not ok
    if args.transformers and args.lora != "only":
        for ok in bert_base_cased_from_hub_layout(args, work, compare, reference):
            passed += ok
            failed += not ok
    print(f"{passed} passed, {failed} failed")
    # Its runs' files (2 GB with --transformers' bert-base-cased): kept only
    # to look at a failure.
    if failed:
        print(f"the runs' files are in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


# bert-base-cased's config.json on the Hub (google-bert/bert-base-cased).
BERT_BASE_CASED_CONFIG = {
    "architectures": ["BertForMaskedLM"], "attention_probs_dropout_prob": 0.1,
    "gradient_checkpointing": False, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
    "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "model_type": "bert",
    "num_attention_heads": 12, "num_hidden_layers": 12, "pad_token_id": 0,
    "position_embedding_type": "absolute", "transformers_version": "4.6.0.dev0",
    "type_vocab_size": 2, "use_cache": True, "vocab_size": 28996,
}


def bert_base_cased_from_hub_layout(args, work, compare, reference):
    """bert-base-cased as a user brings it (this machine cannot download it):
    its config.json, and a model.safetensors laid out as the Hub's, which
    was converted from TensorFlow: BertForPreTraining's tensors with
    LayerNorm `gamma`/`beta`, the pooler and the next-sentence head the
    masked-LM model does not use, `cls.predictions.bias` and no decoder
    tensors (tied). Values are random (the norms and the head bias too, so
    that loading them matters). plan-run --init reads the directory;
    transformers' from_pretrained, with dropout off as the runtime has none,
    is the reference. Yields one verdict per run."""
    import safetensors.torch
    import torch
    import transformers

    hub = os.path.join(work, "bert-base-cased")
    os.makedirs(hub, exist_ok=True)
    with open(os.path.join(hub, "config.json"), "w") as f:
        json.dump(BERT_BASE_CASED_CONFIG, f, indent=2)
    torch.manual_seed(0)
    model = transformers.BertForPreTraining(transformers.BertConfig(**BERT_BASE_CASED_CONFIG))
    tensors = {}
    for name, t in model.state_dict().items():
        if name.startswith("cls.predictions.decoder"):
            continue
        if "LayerNorm" in name or name == "cls.predictions.bias":
            t = t + 0.1 * torch.randn_like(t)
        name = name.replace("LayerNorm.weight", "LayerNorm.gamma")
        name = name.replace("LayerNorm.bias", "LayerNorm.beta")
        tensors[name] = t.contiguous()
    safetensors.torch.save_file(tensors, os.path.join(hub, "model.safetensors"),
                                metadata={"format": "pt"})
    del model, tensors

    def sets(world, sharding):
        return ["model=bert_base_cased", "train.seq_len=32", f"train.micro_batch={2 // world}",
                f"parallel.sharding={sharding}", f"cluster.gpus_per_node={world}",
                "train.steps=0"]

    batch = ["--micro-batch", "2", "--seq-len", "32"]
    ref = reference("bert_base_cased", "ref-hub", ["--hf-dir", hub] + batch, steps=3)
    checkpoints = os.path.join(work, "bert-base-cased-ckpt")
    for world, sharding in [(1, "no_shard"), (2, "full_shard")]:
        yield compare(f"bert-base-cased (Hub layout) world={world} {sharding} --init vs "
                      "transformers from_pretrained", f"bert-base-cased-{world}", world,
                      sets(world, sharding), hub, ref,
                      ["--checkpoint-dir", checkpoints] if world == 2 else [], steps=3)
    # Fine-tuned for classification, the way Accelerate's example does: the
    # checkpoint has no classifier; both draw it from the seed (transformers
    # would draw it from torch's generator).
    labels = os.path.join(work, "bert-base-cased-3-labels.json")
    with open(labels, "w") as f:
        json.dump({"head": "sequence_classification", "num_labels": 3}, f)
    ref = reference("bert_base_cased", "ref-tune",
                    ["--hf-dir", hub, "--config", labels] + batch, steps=3)
    yield compare("bert-base-cased + new 3-label classifier world=2 full_shard --init vs "
                  "transformers from_pretrained", "bert-base-cased-tune", 2,
                  sets(2, "full_shard") + ["model.head=sequence_classification",
                                           "model.num_labels=3"], hub, ref, steps=3)
    # And out: the trained weights, exported, load into transformers with
    # nothing missing, and are the model plan-run trains from them.
    out = os.path.join(work, "bert-base-cased-trained")
    subprocess.run([args.plan_checkpoint, "export", checkpoints, "-o", out], check=True,
                   stdout=subprocess.DEVNULL)
    _, info = transformers.BertForMaskedLM.from_pretrained(out, output_loading_info=True)
    missing = info["missing_keys"] + info["unexpected_keys"] + info["mismatched_keys"]
    print(f"{'FAIL' if missing else 'PASS'} bert-base-cased exported after 3 steps: "
          f"transformers loads every tensor{f' (not: {missing})' if missing else ''}")
    yield not missing
    ref = reference("bert_base_cased", "ref-trained", ["--hf-dir", out] + batch, steps=1)
    yield compare("bert-base-cased exported -> --init vs transformers from_pretrained",
                  "bert-base-cased-trained", 1, sets(1, "no_shard"), out, ref, steps=1)


if __name__ == "__main__":
    sys.exit(main())
