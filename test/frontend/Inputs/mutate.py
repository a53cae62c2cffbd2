#!/usr/bin/env python3
"""Feeds planc mutated copies of every example plan and checks that each is
rejected cleanly: exit code 1 (never a crash, a signal or a hang), at least
one `file:line:col: error:` line, and nothing but diagnostics on stderr.

Mutations, each applied alone to each example:
  - delete a closing or an opening brace
  - insert a garbage token (@, $, `, a stray '=' or ')') at the start of a line
  - misspell a key (drop a letter) in a `key = value` line
  - misspell an identifier value (drop a letter)
  - truncate the file in the middle of a line
Usage: mutate.py PLANC EXAMPLES_DIR WORK_DIR
"""
import os
import re
import subprocess
import sys

planc, examples_dir, work_dir = sys.argv[1:4]
os.makedirs(work_dir, exist_ok=True)
diag = re.compile(r"^(\S+):(\d+):(\d+): (error|warning|note): ")


def mutations(text):
    lines = text.split("\n")
    for i, ch in enumerate(text):
        if ch in "{}":
            yield f"delete '{ch}' at offset {i}", text[:i] + text[i + 1:]
    code_lines = [i for i, l in enumerate(lines)
                  if l.strip() and not l.strip().startswith("#")]
    for n, i in enumerate(code_lines):
        garbage = "@$`=)"[n % 5]
        mutated = lines[:i] + [garbage + " " + lines[i]] + lines[i + 1:]
        yield f"garbage '{garbage}' at line {i + 1}", "\n".join(mutated)
    for i in code_lines:
        m = re.match(r"^(\s*)([a-z_]{4,})(\s*=\s*)(.*)$", lines[i])
        if not m:
            continue
        indent, key, eq, value = m.groups()
        bad_key = key[:2] + key[3:]
        yield (f"misspelled key '{bad_key}' at line {i + 1}",
               "\n".join(lines[:i] + [indent + bad_key + eq + value] + lines[i + 1:]))
        v = re.match(r"^([a-z][a-z0-9_]{4,})(.*)$", value)
        if v and v.group(1) not in ("true", "false"):
            word, rest = v.groups()
            bad = word[:2] + word[3:]
            yield (f"misspelled value '{bad}' at line {i + 1}",
                   "\n".join(lines[:i] + [indent + key + eq + bad + rest] + lines[i + 1:]))
    mid = [i for i in code_lines if "{" in lines[i] or "(" in lines[i]]
    for i in mid[:2]:
        cut = sum(len(l) + 1 for l in lines[:i]) + lines[i].index("{" if "{" in lines[i] else "(") + 1
        yield f"truncated after line {i + 1}", text[:cut]


failures = 0
count = 0
for name in sorted(os.listdir(examples_dir)):
    if not name.endswith(".plan"):
        continue
    with open(os.path.join(examples_dir, name)) as f:
        original = f.read()
    for what, text in mutations(original):
        if text == original:
            continue
        count += 1
        path = os.path.join(work_dir, f"m{count}_{name}")
        with open(path, "w") as f:
            f.write(text)
        try:
            r = subprocess.run([planc, path], capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            print(f"FAIL {name}: {what}: planc hung")
            failures += 1
            continue
        errors = [l for l in r.stderr.splitlines() if diag.match(l) and " error: " in l]
        located = all(diag.match(l).group(1) == path for l in errors)
        if r.returncode != 1 or not errors or not located:
            print(f"FAIL {name}: {what}: exit {r.returncode}\n{r.stderr}")
            failures += 1

print(f"{count} mutated plans: {count - failures} rejected cleanly, {failures} not")
sys.exit(1 if failures or count == 0 else 0)
