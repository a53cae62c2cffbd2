"""Compares two `planc --search=json` outputs: the same winner (every knob)
and the same predicted step, and prints the winner's settings."""
import json
import sys

KNOBS = ("sharding", "mesh", "offload", "activation_checkpointing",
         "micro_batch", "grad_accum", "grad_dtype", "backward_prefetch",
         "forward_prefetch", "max_inflight_gathers", "grad_sync")

pruned, exhaustive = (json.load(open(path)) for path in sys.argv[1:3])
a, b = pruned["best"][0], exhaustive["best"][0]
for knob in KNOBS:
    if a.get(knob) != b.get(knob):
        sys.exit(f"winners differ in {knob}: {a.get(knob)} vs {b.get(knob)}")
if a["step_seconds"] != b["step_seconds"]:
    sys.exit(f"steps differ: {a['step_seconds']} vs {b['step_seconds']}")
print("same winner:", " ".join(f"{k}={a.get(k)}" for k in KNOBS))
print("lowerings: pruned", pruned["stats"]["lowerings"], "< exhaustive",
      exhaustive["stats"]["lowerings"], ":",
      pruned["stats"]["lowerings"] < exhaustive["stats"]["lowerings"])
check = exhaustive.get("extension_check")
if check:
    # How far the numbers the search extends from shorter plans are from
    # the whole plan's, over every candidate the exhaustive search lowered.
    print("extended:", check["candidates"], "candidates; step error < 1%:",
          check["max_step_error"] < 0.01, "; need's lower bound failures:",
          check["bound_failures"])
