# -*- Python -*-
import os
import sys

import lit.formats
from lit.llvm import llvm_config

config.name = "PLAN"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".plan", ".test"]
config.excludes = ["CMakeLists.txt", "Inputs", "lit.cfg.py", "lit.site.cfg.py", "unit", "install"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.plan_obj_root, "test")

config.substitutions.append(("%examples", config.plan_examples_dir))
config.substitutions.append(("%python", sys.executable))

llvm_config.with_system_environment(["HOME", "TMPDIR"])
llvm_config.use_default_substitutions()

tool_dirs = [config.plan_tools_dir, config.llvm_tools_dir]
tools = ["planc", "plan-opt", "FileCheck", "not", "count", "split-file"]
tools += [t for t in config.plan_example_programs.split(";") if t]
# plan-run is built only with the runtime: test/e2e/ REQUIRES plan-run.
if os.path.exists(os.path.join(config.plan_tools_dir, "plan-run")):
    tools.append("plan-run")
    config.available_features.add("plan-run")
    # The real torchrun, from the python3 on PATH that has torch (lit's own
    # interpreter may not).
    import shutil, subprocess
    torch_python = shutil.which("python3")
    if torch_python and subprocess.run(
            [torch_python, "-c", "import torch.distributed.run"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
        config.available_features.add("torchrun")
        config.substitutions.append(("%torchrun", torch_python + " -m torch.distributed.run"))
    # The CUDA backend: "plan-run-cuda" when this plan-run was built with it
    # (`plan-run --version` lists its backends), and "cuda" when, besides, a
    # CUDA device is usable here (torch sees one). Tests that need a GPU say
    # REQUIRES: cuda, and show up as UNSUPPORTED on machines without one.
    version = subprocess.run(
        [os.path.join(config.plan_tools_dir, "plan-run"), "--version"],
        capture_output=True, text=True)
    backends = version.stdout.partition("(backends:")[2]
    if version.returncode == 0 and "cuda" in backends:
        config.available_features.add("plan-run-cuda")
        if torch_python and subprocess.run(
                [torch_python, "-c", "import torch; assert torch.cuda.is_available()"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
            config.available_features.add("cuda")
# plan-checkpoint (inspect, verify, export checkpoints) is built with the
# runtime too: test/checkpoint/ REQUIRES plan-checkpoint.
if os.path.exists(os.path.join(config.plan_tools_dir, "plan-checkpoint")):
    tools.append("plan-checkpoint")
    config.available_features.add("plan-checkpoint")
# planc renders --timeline=FILE.png when it was built with librsvg
# (`planc --version` lists the timeline formats).
import subprocess
planc_version = subprocess.run(
    [os.path.join(config.plan_tools_dir, "planc"), "--version"],
    capture_output=True, text=True).stdout
if "timeline formats: svg, png" in planc_version:
    config.available_features.add("planc-png")
llvm_config.add_tool_substitutions(tools, tool_dirs)
llvm_config.with_environment("PATH", config.plan_tools_dir, append_path=True)
