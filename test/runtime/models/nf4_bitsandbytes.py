#!/usr/bin/env python3
"""The runtime's NF4 (runtime/models/NF4.h) against bitsandbytes'
quantize_4bit(blocksize=64, quant_type="nf4", compress_statistics=True) on
the CPU:
- the packed 4-bit indices, the absmax offset and the absmax scales are the
  same, byte for byte;
- each absmax code is the same, or (bitsandbytes' CPU kernel resolving a
  near-tie the other way) both codes are within 2e-5 of equally near to the
  scaled absmax and ours is the nearer; at most 1% of them (or one);
- every dequantized value (fp32 and bf16) of a block whose absmax code is
  the same is the same.

usage: nf4_bitsandbytes.py PLAN_NF4_TOOL WORK_DIR

Exits 77 (skipped) when bitsandbytes cannot be imported."""
import os
import subprocess
import sys

try:
    import numpy as np
    import torch
    import bitsandbytes.functional as bnbf
except Exception as e:  # ImportError, or a broken install
    print(f"skipped: bitsandbytes is not importable here ({type(e).__name__}: {e})")
    sys.exit(77)

tool, work = sys.argv[1:3]
os.makedirs(work, exist_ok=True)


def cases():
    g = torch.Generator().manual_seed(11)
    yield "normal 4096", torch.randn(4096, generator=g), False
    yield "short last block, odd count", torch.randn(64 * 7 + 33, generator=g) * 0.02, False
    # More than 256 blocks: several absmax scales, the last one short.
    yield "300 blocks of growing scale", torch.randn(64 * 300, generator=g) * torch.linspace(0.01, 5, 64 * 300), False
    yield "a block of zeros", torch.cat([torch.zeros(64), torch.randn(192, generator=g)]), False
    # Student's t with 2 degrees of freedom, z / sqrt(chi2_2 / 2), drawn
    # from the seeded generator so that every run quantizes the same values.
    z, chi = torch.randn(5000, generator=g), torch.randn(2, 5000, generator=g)
    yield "heavy tails", z / (chi.square().sum(0) / 2).sqrt(), False
    yield "bf16 input", torch.randn(3000, generator=g), True
    yield "one element", torch.tensor([0.75]), False


def read(path, dtype):
    return np.fromfile(path, dtype=dtype)


failures = 0
for name, x, bf16 in cases():
    x = x.float().contiguous()
    case_dir = os.path.join(work, name.replace(" ", "_").replace(",", ""))
    os.makedirs(case_dir, exist_ok=True)
    inp = os.path.join(case_dir, "in.f32")
    x.numpy().tofile(inp)
    subprocess.run([tool, inp, case_dir] + (["bf16"] if bf16 else []), check=True)

    source = x.to(torch.bfloat16) if bf16 else x
    packed, state = bnbf.quantize_4bit(source, blocksize=64, quant_type="nf4",
                                       compress_statistics=True)
    want = {
        "packed.u8": packed.reshape(-1).numpy().view(np.uint8),
        "absmax_codes.u8": state.absmax.reshape(-1).numpy().view(np.uint8),
        "absmax_scales.f32": state.state2.absmax.reshape(-1).float().numpy(),
        "offset.f32": np.array([float(state.offset)], dtype=np.float32),
        "absmax.f32": (bnbf.dequantize_blockwise(state.absmax, state.state2) + state.offset).float().numpy(),
    }
    fp32 = bnbf.dequantize_4bit(packed, bnbf.QuantState(
        absmax=state.absmax, shape=x.shape, dtype=torch.float32, blocksize=64,
        code=state.code, quant_type="nf4", offset=state.offset, state2=state.state2))
    bf = bnbf.dequantize_4bit(packed, bnbf.QuantState(
        absmax=state.absmax, shape=x.shape, dtype=torch.bfloat16, blocksize=64,
        code=state.code, quant_type="nf4", offset=state.offset, state2=state.state2))
    want["out.f32"] = fp32.reshape(-1).numpy()
    want["out.bf16"] = bf.reshape(-1).view(torch.int16).numpy().view(np.uint16)

    bad = []
    got = {part: read(os.path.join(case_dir, part), expected.dtype)
           for part, expected in want.items()}
    for part, expected in want.items():
        if got[part].shape != expected.shape:
            bad.append(f"{part}: {got[part].shape[0]} values, bitsandbytes {expected.shape[0]}")
    if not bad:
        for part in ("packed.u8", "absmax_scales.f32", "offset.f32"):
            if not np.array_equal(got[part].view(np.uint8), want[part].view(np.uint8)):
                bad.append(f"{part} differs")
        # The absmax codes: the same, or a near-tie resolved the other way.
        mine, theirs = got["absmax_codes.u8"], want["absmax_codes.u8"]
        code = bnbf.create_dynamic_map(signed=True).numpy()
        absmax = bnbf.quantize_4bit(source, blocksize=64, quant_type="nf4")[1].absmax
        centered = (absmax - state.offset).numpy()
        differ = np.flatnonzero(mine != theirs)
        for i in differ:
            scale = want["absmax_scales.f32"][i // 256]
            normed = np.float32(centered[i] / scale)
            ours = abs(normed - code[mine[i]])
            other = abs(normed - code[theirs[i]])
            if ours > other or other - ours > 2e-5:
                bad.append(f"absmax code {i}: {mine[i]} (distance {ours}) vs bitsandbytes {theirs[i]} ({other})")
        if differ.size > max(1, mine.size // 100):
            bad.append(f"{differ.size} of {mine.size} absmax codes differ")
        # Dequantized values where the absmax code is the same.
        keep = mine == theirs
        if not np.array_equal(got["absmax.f32"][keep].view(np.uint32),
                              want["absmax.f32"][keep].view(np.uint32)):
            bad.append("absmax.f32 differs where the code is the same")
        same = np.repeat(keep, 64)[:x.numel()]
        for part in ("out.f32", "out.bf16"):
            if not np.array_equal(got[part][same], want[part][same]):
                bad.append(f"{part} differs in a block whose absmax code is the same")
        near_ties = f"; {differ.size} of {mine.size} absmax codes a near-tie resolved the other way" if differ.size else ""
    if bad:
        failures += 1
        print(f"FAIL {name}: " + "; ".join(bad))
    else:
        print(f"ok   {name}: {x.numel()} values as bitsandbytes{near_ties}")

print(f"bitsandbytes {getattr(sys.modules.get('bitsandbytes'), '__version__', '?')}, torch {torch.__version__}")
sys.exit(1 if failures else 0)
