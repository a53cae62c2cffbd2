#!/usr/bin/env python3
"""Reference training loop in plain PyTorch for plan-run's end-to-end tests.

The same tiny Llama / GPT-2 as the runtime's units (runtime/models/Model.cpp),
written with HuggingFace's math and HuggingFace's parameter names
(LlamaForCausalLM, GPT2LMHeadModel), trained with torch.optim.AdamW on the
same global batches as plan-run (runtime/data/Data.cpp). Prints one JSON
object per step: {"step": k, "loss": ..., "lr": ..., "grad_norm": ...}.

Only torch and the standard library are needed (no numpy, transformers or
safetensors): the safetensors reader/writer and the data generators are
here, following docs/models.md. With --transformers (or --hf-dir) the model
is transformers' own LlamaForCausalLM / GPT2LMHeadModel / BertForMaskedLM /
BertForSequenceClassification instead, which needs transformers.

  llama_reference.py --model llama_tiny --init-seed 0 --data synthetic \
      --seed 0 --steps 20 --micro-batch 4 --seq-len 128 --lr 1e-3

  llama_reference.py --model gpt2_tiny --weights init.safetensors ...

With --lora-rank R (and --lora-alpha, --lora-targets) it trains LoRA adapters
on the frozen model, as plan-run does with model.lora (HF PEFT's LoraConfig
with dropout 0): `M.lora_A.weight` [r, in] and `M.lora_B.weight` [out, r] on
each targeted linear layer M of the blocks, y = M(x) + B(A(x)) * alpha / r;
only the adapters train. --lora-base nf4 computes with the blocks' linear
weights through NF4 with double quantization (QLoRA, model.base = nf4);
--lora-dropout P drops the adapters' inputs with masks drawn as plan-run
draws them (a generator per sequence and module, docs/models.md).

  llama_reference.py --model llama_tiny --lora-rank 4 --lora-alpha 8 \
      --lora-targets q_proj v_proj ...
"""

import argparse
import ctypes
import json
import math
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

M64 = (1 << 64) - 1

PRESETS = {
    # frontend/Models.cpp
    "llama_tiny": dict(family="llama", vocab=512, hidden=64, intermediate=176,
                       layers=2, heads=4, kv_heads=2, max_seq_len=256,
                       rope_theta=10000.0, norm_eps=1e-5, tie=False),
    "gpt2_tiny": dict(family="gpt2", vocab=512, hidden=64, intermediate=256,
                      layers=2, heads=4, kv_heads=4, max_seq_len=256,
                      rope_theta=10000.0, norm_eps=1e-5, tie=True),
    "bert_tiny": dict(family="bert", vocab=512, hidden=64, intermediate=256,
                      layers=2, heads=4, kv_heads=4, max_seq_len=256, type_vocab=2,
                      norm_eps=1e-12, head="masked_lm", num_labels=2, tie=True),
    "bert_base_cased": dict(family="bert", vocab=28996, hidden=768, intermediate=3072,
                            layers=12, heads=12, kv_heads=12, max_seq_len=512, type_vocab=2,
                            norm_eps=1e-12, head="masked_lm", num_labels=2, tie=True),
}

# --------------------------------------------------------------------------
# safetensors
# --------------------------------------------------------------------------

_ST_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
_ST_NAMES = {v: k for k, v in _ST_DTYPES.items()}


def read_safetensors(path):
    """{name: fp32 tensor} of a .safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    base = 8 + n
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _ST_DTYPES.get(info["dtype"])
        if dtype is None:
            continue  # integer buffers of HF checkpoints are not weights
        b, e = info["data_offsets"]
        raw = bytearray(data[base + b:base + e])
        t = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        out[name] = t.reshape(info["shape"]).float()
    return out


def write_safetensors(path, tensors):
    header = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        raw = ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())
        header[name] = {"dtype": _ST_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text.encode())
        for raw in blobs:
            f.write(raw)

# --------------------------------------------------------------------------
# Initialisation (runtime/models/Seeds.h, Model::initUnit)
# --------------------------------------------------------------------------


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def fnv1a64(s):
    h = 0xCBF29CE484222325
    for c in s.encode():
        h = ((h ^ c) * 0x100000001B3) & M64
    return h


def init_parameter(seed, name, shape):
    if name.endswith(".bias") or name.endswith(".lora_B.weight"):
        return torch.zeros(shape)
    if len(shape) == 1:
        return torch.ones(shape)
    g = torch.Generator().manual_seed(splitmix64((seed & M64) ^ fnv1a64(name)))
    if name.endswith(".lora_A.weight"):
        # PEFT's kaiming_uniform_(a=sqrt(5)) on an nn.Linear(in, r): bound
        # 1/sqrt(in), drawn from the parameter's own generator.
        bound = 1.0 / math.sqrt(shape[1])
        return torch.empty(shape).uniform_(-bound, bound, generator=g)
    return torch.empty(shape).normal_(0.0, 0.02, generator=g)

# --------------------------------------------------------------------------
# Models, HF names and math
# --------------------------------------------------------------------------


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)


def rope_inv_freq(cfg):
    d = cfg["hidden"] // cfg["heads"]
    inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    r = cfg.get("rope_scaling")
    if r:
        factor, low, high, old = r["factor"], r["low_freq_factor"], r["high_freq_factor"], \
            r["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / low, old / high
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        inv = torch.where(medium, smoothed, scaled)
    return inv


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, self.heads, self.kv = cfg["hidden"], cfg["heads"], cfg["kv_heads"]
        self.d = h // self.heads
        self.q_proj = nn.Linear(h, self.heads * self.d, bias=False)
        self.k_proj = nn.Linear(h, self.kv * self.d, bias=False)
        self.v_proj = nn.Linear(h, self.kv * self.d, bias=False)
        self.o_proj = nn.Linear(h, h, bias=False)

    def forward(self, x, cos, sin):
        b, s, h = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.d).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv, self.d).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv, self.d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.heads // self.kv
        k = k[:, :, None].expand(b, self.kv, rep, s, self.d).reshape(b, self.heads, s, self.d)
        v = v[:, :, None].expand(b, self.kv, rep, s, self.d).reshape(b, self.heads, s, self.d)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(a.transpose(1, 2).contiguous().reshape(b, s, h))


class LlamaMLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, i = cfg["hidden"], cfg["intermediate"]
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.self_attn = LlamaAttention(cfg)
        self.mlp = LlamaMLP(cfg)
        self.input_layernorm = RMSNorm(cfg["hidden"], cfg["norm_eps"])
        self.post_attention_layernorm = RMSNorm(cfg["hidden"], cfg["norm_eps"])

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab"], cfg["hidden"])
        self.layers = nn.ModuleList(LlamaDecoderLayer(cfg) for _ in range(cfg["layers"]))
        self.norm = RMSNorm(cfg["hidden"], cfg["norm_eps"])
        self.register_buffer("inv_freq", rope_inv_freq(cfg), persistent=False)

    def forward(self, tokens):
        x = self.embed_tokens(tokens)
        s = tokens.shape[1]
        freqs = torch.outer(torch.arange(s, dtype=torch.float32), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x)


class LlamaForCausalLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.model = LlamaModel(cfg)
        self.lm_head = nn.Linear(cfg["hidden"], cfg["vocab"], bias=False)
        if cfg["tie"]:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, tokens):
        return self.lm_head(self.model(tokens)).float()


class Conv1D(nn.Module):
    """GPT-2's linear layer: weight stored [in, out]."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        out = torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight)
        return out.view(*x.shape[:-1], self.weight.shape[1])


class GPT2Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h = cfg["hidden"]
        self.heads = cfg["heads"]
        self.c_attn = Conv1D(h, 3 * h)
        self.c_proj = Conv1D(h, h)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.c_attn(x).split(h, dim=2)
        shape = (b, s, self.heads, h // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(a.transpose(1, 2).contiguous().reshape(b, s, h))


class GPT2MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_fc = Conv1D(cfg["hidden"], cfg["intermediate"])
        self.c_proj = Conv1D(cfg["intermediate"], cfg["hidden"])

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GPT2Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, eps = cfg["hidden"], cfg["norm_eps"]
        self.ln_1 = nn.LayerNorm(h, eps=eps)
        self.attn = GPT2Attention(cfg)
        self.ln_2 = nn.LayerNorm(h, eps=eps)
        self.mlp = GPT2MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.wte = nn.Embedding(cfg["vocab"], cfg["hidden"])
        self.wpe = nn.Embedding(cfg["max_seq_len"], cfg["hidden"])
        self.h = nn.ModuleList(GPT2Block(cfg) for _ in range(cfg["layers"]))
        self.ln_f = nn.LayerNorm(cfg["hidden"], eps=cfg["norm_eps"])

    def forward(self, tokens):
        s = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(s))[None]
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.transformer = GPT2Model(cfg)
        self.lm_head = nn.Linear(cfg["hidden"], cfg["vocab"], bias=False)
        self.lm_head.weight = self.transformer.wte.weight

    def forward(self, tokens):
        return self.lm_head(self.transformer(tokens)).float()


BERT_PAD_TOKEN = 0  # pad_token_id: nn.Embedding's padding_idx
BERT_MASK_TOKEN = 103  # [MASK] in bert-base's vocabulary, else vocab - 1


class BertEmbeddings(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h = cfg["hidden"]
        self.word_embeddings = nn.Embedding(cfg["vocab"], h, padding_idx=BERT_PAD_TOKEN)
        self.position_embeddings = nn.Embedding(cfg["max_seq_len"], h)
        self.token_type_embeddings = nn.Embedding(cfg["type_vocab"], h)
        self.LayerNorm = nn.LayerNorm(h, eps=cfg["norm_eps"])

    def forward(self, tokens):
        s = tokens.shape[1]
        types = torch.zeros_like(tokens)  # HF's default token_type_ids
        x = (self.word_embeddings(tokens) + self.token_type_embeddings(types)
             + self.position_embeddings(torch.arange(s)))
        return self.LayerNorm(x)


class BertSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h = cfg["hidden"]
        self.heads = cfg["heads"]
        self.query = nn.Linear(h, h)
        self.key = nn.Linear(h, h)
        self.value = nn.Linear(h, h)

    def forward(self, x):
        b, s, h = x.shape
        split = lambda t: t.view(b, s, self.heads, h // self.heads).transpose(1, 2)
        a = F.scaled_dot_product_attention(split(self.query(x)), split(self.key(x)),
                                           split(self.value(x)))
        return a.transpose(1, 2).reshape(b, s, h)


class BertDenseLayerNorm(nn.Module):
    """BertSelfOutput / BertOutput: LayerNorm(residual + dense(x))."""

    def __init__(self, n_in, cfg):
        super().__init__()
        self.dense = nn.Linear(n_in, cfg["hidden"])
        self.LayerNorm = nn.LayerNorm(cfg["hidden"], eps=cfg["norm_eps"])

    def forward(self, x, residual):
        return self.LayerNorm(residual + self.dense(x))


class BertAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.self = BertSelfAttention(cfg)
        self.output = BertDenseLayerNorm(cfg["hidden"], cfg)

    def forward(self, x):
        return self.output(self.self(x), x)


class BertIntermediate(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg["hidden"], cfg["intermediate"])

    def forward(self, x):
        return F.gelu(self.dense(x))  # exact (erf) GELU: hidden_act = "gelu"


class BertLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attention = BertAttention(cfg)
        self.intermediate = BertIntermediate(cfg)
        self.output = BertDenseLayerNorm(cfg["intermediate"], cfg)

    def forward(self, x):
        h1 = self.attention(x)
        return self.output(self.intermediate(h1), h1)


class BertEncoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(cfg) for _ in range(cfg["layers"]))

    def forward(self, x):
        for layer in self.layer:
            x = layer(x)
        return x


class BertPooler(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg["hidden"], cfg["hidden"])

    def forward(self, x):
        return torch.tanh(self.dense(x[:, 0]))


class BertModel(nn.Module):
    def __init__(self, cfg, pooler):
        super().__init__()
        self.embeddings = BertEmbeddings(cfg)
        self.encoder = BertEncoder(cfg)
        if pooler:
            self.pooler = BertPooler(cfg)

    def forward(self, tokens):
        return self.encoder(self.embeddings(tokens))


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg["hidden"], cfg["hidden"])
        self.LayerNorm = nn.LayerNorm(cfg["hidden"], eps=cfg["norm_eps"])

    def forward(self, x):
        return self.LayerNorm(F.gelu(self.dense(x)))


class BertLMPredictionHead(nn.Module):
    """The decoder is the word embeddings (tied); `bias` is its own."""

    def __init__(self, cfg):
        super().__init__()
        self.transform = BertPredictionHeadTransform(cfg)
        self.bias = nn.Parameter(torch.zeros(cfg["vocab"]))


class BertOnlyMLMHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.predictions = BertLMPredictionHead(cfg)


class BertForMaskedLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.bert = BertModel(cfg, pooler=False)
        self.cls = BertOnlyMLMHead(cfg)

    def forward(self, tokens):
        head = self.cls.predictions
        t = head.transform(self.bert(tokens))
        return F.linear(t, self.bert.embeddings.word_embeddings.weight, head.bias)


class BertForSequenceClassification(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.bert = BertModel(cfg, pooler=True)
        self.classifier = nn.Linear(cfg["hidden"], cfg["num_labels"])

    def forward(self, tokens):
        return self.classifier(self.bert.pooler(self.bert(tokens)))


def build_model(cfg):
    if cfg["family"] == "bert":
        return (BertForMaskedLM(cfg) if cfg["head"] == "masked_lm"
                else BertForSequenceClassification(cfg))
    return LlamaForCausalLM(cfg) if cfg["family"] == "llama" else GPT2LMHeadModel(cfg)


# --------------------------------------------------------------------------
# LoRA (frontend/Models.cpp: loraModules, defaultLoraTargets, loraTargetMatches)
# --------------------------------------------------------------------------

# The family's targets when the plan names none (PEFT's defaults).
LORA_DEFAULT_TARGETS = {"llama": ["q_proj", "v_proj"], "gpt2": ["c_attn"],
                        "bert": ["query", "value"]}
LORA_ALL_LINEAR = "all_linear"


def model_blocks(model, cfg):
    """The blocks (decoder layers) of `model`, ours or transformers'."""
    if cfg["family"] == "llama":
        return model.model.layers
    if cfg["family"] == "gpt2":
        return model.transformer.h
    return model.bert.encoder.layer


def block_linears(block):
    """(name relative to the block, module, in, out) of every linear layer of
    a block, in parameter order: nn.Linear (weight [out, in]) and GPT-2's
    Conv1D (weight [in, out]), ours or transformers'."""
    out = []
    for name, module in block.named_modules():
        if ".lora_" in f".{name}":
            continue
        if isinstance(module, nn.Linear):
            out.append((name, module, module.in_features, module.out_features))
        elif type(module).__name__ == "Conv1D":
            n_in, n_out = module.weight.shape
            out.append((name, module, n_in, n_out))
    return out


def lora_target_matches(module, target):
    """PEFT's suffix match: `target` is the module's name relative to the
    block or a suffix of it after a dot."""
    return bool(target) and (module == target or module.endswith("." + target))


# LoRA dropout (--lora-dropout): the probability, the run's seed and the
# global index of the micro-batch's first sequence, set before each forward.
LORA_DROPOUT = {"p": 0.0, "seed": 0, "first": 0}


def lora_dropout_seed(seed, module, sequence):
    """runtime/models/Seeds.h, loraDropoutSeed."""
    name_seed = splitmix64(seed ^ fnv1a64(module + ".lora_dropout"))
    return splitmix64(name_seed ^ (sequence & M64))


def lora_dropout(x, module):
    """PEFT's lora_dropout as plan-run draws it: sequence r of the
    micro-batch drops the elements where uniform fp32 values [seq_len, in]
    from a generator seeded by lora_dropout_seed are at least 1 - p, and
    the rest are scaled by 1 / (1 - p)."""
    keep = 1.0 - LORA_DROPOUT["p"]
    drop = torch.empty(x.shape, dtype=torch.bool)
    for r in range(x.shape[0]):
        g = torch.Generator()
        g.manual_seed(lora_dropout_seed(LORA_DROPOUT["seed"], module,
                                        LORA_DROPOUT["first"] + r))
        drop[r] = torch.rand(tuple(x.shape[1:]), generator=g) >= keep
    return x.masked_fill(drop, 0) * (1.0 / keep)


def lora_forward_hook(module, inputs, output):
    x = inputs[0]
    if LORA_DROPOUT["p"] > 0:
        x = lora_dropout(x, module.lora_name)
    return output + module.lora_B(module.lora_A(x)) * module.lora_scaling


def add_lora(model, cfg, rank, alpha, targets=None):
    """Adds `M.lora_A` (nn.Linear in -> rank) and `M.lora_B` (rank -> out),
    no bias, to each targeted linear layer M of the blocks (all of them with
    "all_linear"), so that their weights follow M's own in named_parameters,
    and makes M compute M(x) + lora_B(lora_A(x)) * alpha / rank. Their values
    are set later (init_parameter, or a checkpoint). Every parameter but the
    adapters is frozen. Returns the adapters' parameters."""
    targets = list(targets or LORA_DEFAULT_TARGETS[cfg["family"]])
    every = LORA_ALL_LINEAR in targets
    adapters, matched = [], set()
    full_names = {id(m): n for n, m in model.named_modules()}
    for block in model_blocks(model, cfg):
        for name, module, n_in, n_out in block_linears(block):
            hits = [t for t in targets if lora_target_matches(name, t)]
            if not (every or hits):
                continue
            matched.update(hits)
            ref = module.weight
            module.lora_A = nn.Linear(n_in, rank, bias=False, device=ref.device, dtype=ref.dtype)
            module.lora_B = nn.Linear(rank, n_out, bias=False, device=ref.device, dtype=ref.dtype)
            module.lora_scaling = alpha / rank
            module.lora_name = full_names[id(module)]
            module.register_forward_hook(lora_forward_hook)
            adapters += [module.lora_A.weight, module.lora_B.weight]
    unmatched = [t for t in targets if t != LORA_ALL_LINEAR and t not in matched]
    if unmatched:
        names = [n for n, *_ in block_linears(model_blocks(model, cfg)[0])]
        sys.exit(f"LoRA targets {unmatched} match no linear layer of a block ({names})")
    ids = {id(t) for t in adapters}
    for param in model.parameters():
        param.requires_grad_(id(param) in ids)
    return adapters


def is_lora_adapter(name):
    return name.endswith(".lora_A.weight") or name.endswith(".lora_B.weight")


# --------------------------------------------------------------------------
# QLoRA's base (--lora-base nf4): NF4 with double quantization as
# bitsandbytes' quantize_4bit(blocksize=64, quant_type="nf4",
# compress_statistics=True) stores it (docs/models.md, "NF4"), written here
# from that description in torch, and dequantized back in fp32.
# --------------------------------------------------------------------------

NF4_CODE = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
            -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
            0.07958029955625534, 0.16093020141124725, 0.24611230194568634,
            0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
            0.7229568362236023, 1.0]


def dynamic_map():
    """bitsandbytes' signed 8-bit dynamic map: for each exponent e = 0..6 the
    midpoints of 2^e + 1 points over [0.1, 1] times 10^(e - 6), both signs;
    then 0 and 1; ascending, fp32."""
    values = []
    for e in range(7):
        bounds = torch.linspace(0.1, 1.0, 2 ** e + 1, dtype=torch.float32)
        means = (bounds[:-1] + bounds[1:]) / 2.0
        values += (means * 10.0 ** (e - 6)).tolist() + (means * -(10.0 ** (e - 6))).tolist()
    return torch.tensor(sorted(values + [0.0, 1.0]), dtype=torch.float32)


def nearest_lower_at_tie(x, table):
    """The index of the value of ascending `table` nearest each of `x`
    (clamped to the table's range), the lower one at a tie, in fp32."""
    x = x.clamp(table[0].item(), table[-1].item())
    right = torch.searchsorted(table, x).clamp(1, len(table) - 1)
    left = right - 1
    take_right = (table[right] - x).abs() < (x - table[left]).abs()
    return torch.where(take_right, right, left)


def nf4_round_trip(w):
    """`w` (fp32) quantized to NF4 with double quantization, dequantized."""
    flat = w.detach().reshape(-1).to(torch.float32)
    n = flat.numel()
    full = n - n % 64
    blocks = flat[:full].reshape(-1, 64)
    absmax = blocks.abs().amax(-1)
    scaled = (blocks * torch.reciprocal(absmax.clamp_min(1e-38)).view(-1, 1)).clamp(-1, 1)
    scaled = scaled.reshape(-1)
    if n % 64:
        tail = flat[full:]
        am = tail.abs().amax().clamp_min(1e-38)
        absmax = torch.cat([absmax, am.view(1)])
        scaled = torch.cat([scaled, (tail / am).clamp(-1, 1)])
    code = torch.tensor(NF4_CODE, dtype=torch.float32)
    mids = (code[:-1] + code[1:]) / 2.0
    index = torch.bucketize(scaled, mids)  # a value half-way goes to the lower
    # Double quantization of the absmax, less their mean, in blocks of 256.
    mean = absmax.mean()
    centered = absmax - mean
    dmap = dynamic_map()
    restored = torch.empty_like(centered)
    for start in range(0, centered.numel(), 256):
        part = centered[start:start + 256]
        scale = part.abs().amax()
        codes = nearest_lower_at_tie(part / scale, dmap)
        restored[start:start + 256] = dmap[codes] * scale
    restored = restored + mean
    out = code[index] * restored.repeat_interleave(64)[:n]
    return out.reshape(w.shape)


def quantize_base(model, cfg):
    """QLoRA: every linear weight of the blocks (nn.Linear, GPT-2's Conv1D,
    in its stored layout) replaced by its NF4 round trip, as plan-run's
    `model.base = nf4` computes with it."""
    with torch.no_grad():
        for block in model_blocks(model, cfg):
            for _, module, _, _ in block_linears(block):
                module.weight.copy_(nf4_round_trip(module.weight))

# --------------------------------------------------------------------------
# The same models built by HF transformers itself (--transformers, --hf-dir)
# --------------------------------------------------------------------------


def transformers_class(cfg):
    """transformers' class for `cfg`'s model, with forward(tokens) -> logits
    like the classes above. Its parameter names are the ones above."""
    import transformers

    # Its notes (unused pooler weights, no attention_mask) are expected here.
    transformers.logging.set_verbosity_error()
    if cfg["family"] == "llama":
        base = transformers.LlamaForCausalLM
    elif cfg["family"] == "gpt2":
        base = transformers.GPT2LMHeadModel
    elif cfg["head"] == "masked_lm":
        base = transformers.BertForMaskedLM
    else:
        base = transformers.BertForSequenceClassification

    class Logits(base):
        def forward(self, tokens):
            return super().forward(input_ids=tokens).logits

    Logits.__name__ = base.__name__
    return Logits


def transformers_config(cfg):
    """The HF config of `cfg`'s model; no dropout (the runtime has none)."""
    import transformers

    if cfg["family"] == "llama":
        return transformers.LlamaConfig(
            vocab_size=cfg["vocab"], hidden_size=cfg["hidden"],
            intermediate_size=cfg["intermediate"], num_hidden_layers=cfg["layers"],
            num_attention_heads=cfg["heads"], num_key_value_heads=cfg["kv_heads"],
            max_position_embeddings=cfg["max_seq_len"], rope_theta=cfg["rope_theta"],
            rms_norm_eps=cfg["norm_eps"], tie_word_embeddings=cfg["tie"])
    if cfg["family"] == "gpt2":
        return transformers.GPT2Config(
            vocab_size=cfg["vocab"], n_embd=cfg["hidden"], n_inner=cfg["intermediate"],
            n_layer=cfg["layers"], n_head=cfg["heads"], n_positions=cfg["max_seq_len"],
            layer_norm_epsilon=cfg["norm_eps"], resid_pdrop=0.0, embd_pdrop=0.0,
            attn_pdrop=0.0)
    return transformers.BertConfig(
        vocab_size=cfg["vocab"], hidden_size=cfg["hidden"],
        intermediate_size=cfg["intermediate"], num_hidden_layers=cfg["layers"],
        num_attention_heads=cfg["heads"], max_position_embeddings=cfg["max_seq_len"],
        type_vocab_size=cfg["type_vocab"], layer_norm_eps=cfg["norm_eps"],
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        pad_token_id=BERT_PAD_TOKEN, num_labels=cfg["num_labels"])


def transformers_model(cfg, hf_dir=None, init_seed=0):
    """transformers' model of `cfg`: fresh, or from_pretrained(hf_dir), the
    way a user loads a Hub checkpoint (its key renames and tied weights),
    with dropout off. Its sizes must be cfg's. A new task head the
    checkpoint lacks (a classifier on a pretrained encoder) is drawn as the
    runtime draws it, from `init_seed`, instead of by transformers."""
    cls = transformers_class(cfg)
    if not hf_dir:
        return cls(transformers_config(cfg))
    drop = ({"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
            if cfg["family"] == "bert" else
            {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
            if cfg["family"] == "gpt2" else {})
    if cfg["family"] == "bert" and cfg["head"] != "masked_lm":
        drop["num_labels"] = cfg["num_labels"]
    model, info = cls.from_pretrained(hf_dir, output_loading_info=True, **drop)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name in info["missing_keys"]:
            if name in params:
                params[name].copy_(init_parameter(init_seed, name, tuple(params[name].shape)))
    ours = transformers_config(cfg).to_dict()
    for key, value in model.config.to_dict().items():
        if key in ("vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size",
                   "num_attention_heads", "n_embd", "n_layer", "n_head") \
                and ours.get(key) != value:
            sys.exit(f"{hf_dir}: {key} is {value}, the preset's is {ours.get(key)}")
    return model


def stored_parameters(model):
    """(name, parameter) of every stored parameter; a tied one once, under
    the name of the unit that defines it (the embedding)."""
    return list(model.named_parameters())  # named_parameters() drops duplicates

# --------------------------------------------------------------------------
# Data (runtime/data/Data.cpp)
# --------------------------------------------------------------------------

SYNTHETIC_ALPHABET = 64
SYNTHETIC_RULES = [(1, 1), (3, 7), (5, 13), (7, 31)]


def synthetic_sequence(seed, j, vocab, seq_len):
    m = min(vocab, SYNTHETIC_ALPHABET)
    h = splitmix64((splitmix64(seed & M64) + j) & M64)
    a, c = SYNTHETIC_RULES[h & 3]
    t = (h >> 8) % m
    out = []
    for _ in range(seq_len + 1):
        out.append(t)
        t = (a * t + c) % m
    return out


class TokenFile:
    def __init__(self, path, vocab):
        with open(path, "rb") as f:
            data = f.read()
        self.vocab = vocab
        magic, version, count = struct.unpack("<iii", data[:12]) if len(data) >= 1024 else (0, 0, 0)
        if magic == 20240520 and version == 1:
            self.tokens = torch.frombuffer(bytearray(data[1024:1024 + 2 * count]), dtype=torch.uint16)
        elif magic == 20240801 and version == 7:
            self.tokens = torch.frombuffer(bytearray(data[1024:1024 + 4 * count]), dtype=torch.uint32)
        elif magic in (20240520, 20240801):
            sys.exit(f"{path}: llm.c header with an unknown version {version}")
        else:
            self.tokens = torch.frombuffer(bytearray(data), dtype=torch.uint16)
        self.tokens = self.tokens.to(torch.int64)

    def sequence(self, j, seq_len):
        n = self.tokens.numel()
        if n < seq_len + 2:
            sys.exit(f"token file has {n} tokens; seq_len {seq_len} needs at least {seq_len + 2}")
        start = (j * seq_len) % (n - seq_len - 1)
        w = self.tokens[start:start + seq_len + 1]
        if int(w.max()) >= self.vocab:
            sys.exit(f"token id {int(w.max())} >= vocab {self.vocab}")
        return w.tolist()


MASK_SALT = 0x6D61736B  # "mask"
MASK_UNIT = 1 << 24
IGNORE = -100


class Masker:
    """HF's DataCollatorForLanguageModeling as the runtime draws it: a pure
    function of (seed, global sequence, position) (docs/models.md, "Data")."""

    def __init__(self, seed, vocab, probability=0.15):
        self.key = splitmix64((seed & M64) ^ MASK_SALT)
        self.vocab = vocab
        self.threshold = int(probability * MASK_UNIT)
        self.mask_token = min(BERT_MASK_TOKEN, vocab - 1)

    def draws(self, j, seq_len):
        base = splitmix64((self.key + j) & M64)
        return [splitmix64((base + n) & M64) for n in range(seq_len)]

    def chosen(self, u):
        return (u >> 40) < self.threshold

    def count(self, j, seq_len):
        return sum(self.chosen(u) for u in self.draws(j, seq_len))

    def mask(self, j, tokens):
        targets = []
        for n, u in enumerate(self.draws(j, len(tokens))):
            if not self.chosen(u):
                targets.append(IGNORE)
                continue
            targets.append(tokens[n])
            how = (u >> 16) & (MASK_UNIT - 1)
            if how < MASK_UNIT // 10 * 8:
                tokens[n] = self.mask_token
            elif how < MASK_UNIT // 10 * 9:
                tokens[n] = splitmix64(u) % self.vocab
        return targets


def synthetic_label(seed, j):
    """The rule the synthetic data made sequence j with: its class label."""
    return splitmix64((splitmix64(seed & M64) + j) & M64) & 3


def global_batch(source, step, global_size, seq_len):
    """Rows of step `step` (1-based): global sequences [(k-1)G, kG)."""
    rows = [source(j, seq_len) for j in range((step - 1) * global_size, step * global_size)]
    t = torch.tensor(rows, dtype=torch.int64)
    return t[:, :-1].contiguous(), t[:, 1:].contiguous()

# --------------------------------------------------------------------------
# Learning-rate schedules: HF's get_{constant,linear,cosine}_schedule_with_warmup
# (cosine_with_min_lr for a non-zero ratio), as runtime/core/LRSchedule.cpp
# computes them; optimizer step k (1-based) uses HF's current_step = k - 1.
# --------------------------------------------------------------------------


def bert_batch(cfg, args, source, masker, step, per_step):
    """BERT's rows of step `step` with their targets: masked tokens and their
    labels (-100 where not chosen), or one label per sequence; and the
    masked-LM loss divisor, the step's masked positions per micro-batch."""
    first = (step - 1) * per_step
    rows, targets = [], []
    for j in range(first, first + per_step):
        tokens = source(j, args.seq_len)[:args.seq_len]
        if cfg["head"] == "masked_lm":
            targets.append(masker.mask(j, tokens))
        else:
            label = synthetic_label(args.seed, j)
            targets.append(float(label) if cfg["num_labels"] == 1 else label % cfg["num_labels"])
        rows.append(tokens)
    masked = sum(masker.count(j, args.seq_len) for j in range(first, first + per_step))
    divisor = max(masked, 1) / (per_step // args.micro_batch)
    dtype = torch.float32 if cfg["head"] != "masked_lm" and cfg["num_labels"] == 1 else torch.int64
    return torch.tensor(rows, dtype=torch.int64), torch.tensor(targets, dtype=dtype), divisor


def lr_multiplier(kind, current, warmup, total, min_ratio):
    if current < warmup:
        return current / max(1, warmup)
    if kind == "constant":
        return 1.0
    decay = max(1, total - warmup)
    if kind == "linear":
        remaining = (total - current) / decay
        return max(min_ratio, min_ratio + (1.0 - min_ratio) * remaining)
    progress = min(1.0, (current - warmup) / decay)  # holds its final rate past the end
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
    return max(0.0, cosine * (1.0 - min_ratio) + min_ratio)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="llama_tiny", choices=sorted(PRESETS))
    p.add_argument("--config", help="JSON object overriding preset keys (vocab, hidden, ...)")
    p.add_argument("--weights", help="initial weights (.safetensors, HF names)")
    p.add_argument("--transformers", action="store_true",
                   help="build the model with HF transformers' own classes, not the ones here")
    p.add_argument("--hf-dir", help="an HF model directory, loaded by transformers' "
                   "from_pretrained as a user would (implies --transformers)")
    p.add_argument("--init-seed", type=int, default=0,
                   help="without --weights: the runtime's initialisation with this seed")
    p.add_argument("--dump-init", help="write the initial weights to this .safetensors file")
    p.add_argument("--data", default="synthetic", help="'synthetic' or a token file")
    p.add_argument("--seed", type=int, default=0, help="synthetic data seed")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--grad-accum", type=int, default=1)
    p.add_argument("--dp", type=int, default=1, help="data-parallel ranks (global batch size only)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--betas", type=float, nargs=2, default=(0.9, 0.999))
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--decay", default="matrices", choices=["matrices", "all"],
                   help="parameters weight decay applies to: those of 2+ dimensions "
                        "(the HF Trainer's groups) or all (one param group)")
    p.add_argument("--lr-schedule", default="constant", choices=["constant", "linear", "cosine"])
    p.add_argument("--warmup", type=int, default=0)
    p.add_argument("--min-lr-ratio", type=float, default=0.0)
    p.add_argument("--grad-clip", type=float, default=0.0)
    p.add_argument("--lora-rank", type=int, default=0,
                   help="train LoRA adapters of this rank on the frozen model (0: no LoRA, "
                        "every parameter trains)")
    p.add_argument("--lora-alpha", type=float, help="LoRA's alpha (scale alpha / rank); "
                   "default: the rank")
    p.add_argument("--lora-targets", nargs="+", metavar="MODULE",
                   help="linear layers of the blocks that get adapters: names or name "
                        "suffixes (q_proj, attn.c_attn), or all_linear; default: the "
                        "family's (llama: q_proj v_proj, gpt2: c_attn, bert: query value)")
    p.add_argument("--lora-dropout", type=float, default=0.0,
                   help="LoRA dropout on the adapters' inputs, drawn as plan-run draws it")
    p.add_argument("--lora-base", choices=["nf4"],
                   help="compute with the blocks' linear weights through this storage "
                        "(nf4: QLoRA's NF4 with double quantization)")
    args = p.parse_args()
    if args.lora_rank < 0:
        p.error("--lora-rank must be positive")
    if not args.lora_rank and (args.lora_alpha is not None or args.lora_targets):
        p.error("--lora-alpha and --lora-targets need --lora-rank")
    if (args.lora_base or args.lora_dropout) and not args.lora_rank:
        p.error("--lora-base and --lora-dropout need --lora-rank")
    LORA_DROPOUT["p"], LORA_DROPOUT["seed"] = args.lora_dropout, args.seed

    torch.manual_seed(0)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    cfg = dict(PRESETS[args.model])
    if args.config:
        cfg.update(json.loads(open(args.config).read()))
    if args.transformers or args.hf_dir:
        model = transformers_model(cfg, args.hf_dir, args.init_seed)
    else:
        model = build_model(cfg)
    if args.lora_rank:
        lora_alpha = args.lora_rank if args.lora_alpha is None else args.lora_alpha
        add_lora(model, cfg, args.lora_rank, lora_alpha, args.lora_targets)

    named = stored_parameters(model)
    if args.hf_dir:
        # from_pretrained loaded the base; the adapters are new, drawn as
        # the runtime draws them.
        with torch.no_grad():
            for name, param in named:
                if is_lora_adapter(name):
                    param.copy_(init_parameter(args.init_seed, name, tuple(param.shape)))
    elif args.weights:
        stored = read_safetensors(args.weights)
        for name, param in named:
            key = name if name in stored else name.removeprefix("transformer.")
            if key not in stored and is_lora_adapter(name):
                # A base model's weights: its adapters start as the runtime's.
                with torch.no_grad():
                    param.copy_(init_parameter(args.init_seed, name, tuple(param.shape)))
                continue
            if key not in stored:
                sys.exit(f"{args.weights}: no tensor '{name}'")
            if tuple(stored[key].shape) != tuple(param.shape):
                sys.exit(f"{args.weights}: '{name}' has shape {list(stored[key].shape)}, "
                         f"expected {list(param.shape)}")
            with torch.no_grad():
                param.copy_(stored[key])
    else:
        with torch.no_grad():
            for name, param in named:
                param.copy_(init_parameter(args.init_seed, name, tuple(param.shape)))
                if name == "bert.embeddings.word_embeddings.weight":
                    param[BERT_PAD_TOKEN].zero_()  # as nn.Embedding(padding_idx) starts
    if args.dump_init:
        write_safetensors(args.dump_init, {n: t for n, t in named})
    if args.lora_base == "nf4":
        quantize_base(model, cfg)

    if args.data == "synthetic":
        def source(j, s):
            return synthetic_sequence(args.seed, j, cfg["vocab"], s)
    else:
        source = TokenFile(args.data, cfg["vocab"]).sequence

    # With LoRA only the adapters train: the frozen base has no gradient,
    # no optimizer state and no part in the gradient norm or its clipping.
    trained = [(n, t) for n, t in named if t.requires_grad]
    params = [t for _, t in trained]
    if args.decay == "all":
        groups = [{"params": [t for _, t in trained]}]
    else:
        # The HF Trainer's groups: no decay on biases and norm weights.
        groups = [{"params": [t for _, t in trained if t.dim() >= 2]},
                  {"params": [t for _, t in trained if t.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=args.lr, betas=tuple(args.betas), eps=args.eps,
                            weight_decay=args.weight_decay)
    per_step = args.grad_accum * args.dp * args.micro_batch
    bert = cfg["family"] == "bert"
    if bert and cfg["head"] != "masked_lm" and args.data != "synthetic":
        sys.exit("a classification head needs labels: only synthetic data has them")
    masker = Masker(args.seed, cfg["vocab"])
    for step in range(1, args.steps + 1):
        lr = args.lr * lr_multiplier(args.lr_schedule, step - 1, args.warmup, args.steps,
                                     args.min_lr_ratio)
        for group in opt.param_groups:
            group["lr"] = lr
        if bert:
            tokens, targets, divisor = bert_batch(cfg, args, source, masker, step, per_step)
        else:
            tokens, targets = global_batch(source, step, per_step, args.seq_len)
        opt.zero_grad(set_to_none=True)
        # The mean of the micro-batches' mean losses, as the runtime's
        # 1/micro_batches loss scale and its average over ranks give.
        total = 0.0
        for i in range(0, per_step, args.micro_batch):
            LORA_DROPOUT["first"] = (step - 1) * per_step + i
            logits = model(tokens[i:i + args.micro_batch])
            rows = targets[i:i + args.micro_batch]
            if bert and cfg["head"] == "masked_lm":
                # Summed over the masked positions, divided by the step's
                # masked positions per micro-batch: the step's loss is the
                # mean over all of them (HF's num_items_in_batch).
                loss = F.cross_entropy(logits.reshape(-1, cfg["vocab"]), rows.reshape(-1),
                                       ignore_index=IGNORE, reduction="sum") / divisor
            elif bert and cfg["num_labels"] == 1:
                loss = F.mse_loss(logits.squeeze(-1), rows)
            elif bert:
                loss = F.cross_entropy(logits, rows)
            else:
                loss = F.cross_entropy(logits.reshape(-1, cfg["vocab"]), rows.reshape(-1))
            (loss * (args.micro_batch / per_step)).backward()
            total += loss.item() * args.micro_batch / per_step
        norm = torch.sqrt(sum((q.grad.double() ** 2).sum() for q in params)).item()
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, args.grad_clip)
        opt.step()
        print(json.dumps({"step": step, "loss": total, "lr": lr, "grad_norm": norm}), flush=True)


if __name__ == "__main__":
    main()
