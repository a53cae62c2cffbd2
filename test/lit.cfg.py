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
llvm_config.add_tool_substitutions(tools, tool_dirs)
llvm_config.with_environment("PATH", config.plan_tools_dir, append_path=True)
