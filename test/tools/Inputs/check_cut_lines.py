"""Checks the diagnostics in FILE: every source line shown is at most WIDTH
characters plus the "..." at a cut end, and the caret under it points at
the key the error names ('unknown key NAME').

usage: check_cut_lines.py FILE WIDTH"""
import re
import sys

lines = open(sys.argv[1]).read().split("\n")
width = int(sys.argv[2])
checked = 0
for i, line in enumerate(lines):
    m = re.match(r".*:\d+:\d+: error: unknown key '([^']+)'", line)
    if not m:
        continue
    shown, caret = lines[i + 1], lines[i + 2]
    if len(shown) > width + 6:
        sys.exit(f"line {i + 2}: {len(shown)} characters shown")
    at = caret.index("^")
    if not shown[at:].startswith(m.group(1) + " "):
        sys.exit(f"line {i + 3}: the caret is at {shown[at:at + 12]!r}, not at {m.group(1)!r}")
    checked += 1
if checked == 0:
    sys.exit("no error to check")
print(f"{checked} cut lines, carets on their keys")
