"""Checks an SVG written by `planc --timeline` against the Chrome trace of
the same plan (`--trace`), and summarises it for FileCheck.

The SVG must be well-formed XML with one `lane-<stream>` group per stream
that has ops, one `op` box per trace slice of that stream, with the same
names in the same order; exposed waits are the compute boxes marked
`exposed`. The memory polyline of each space has two points per op (a step
function) and its highest point is the trace's counter maximum.

usage: check_timeline.py STEP.svg TRACE.json"""
import json
import sys
import xml.etree.ElementTree as ET

NS = {"s": "http://www.w3.org/2000/svg"}
STREAMS = ["compute", "comm", "h2d", "d2h", "net"]

svg = ET.parse(sys.argv[1]).getroot()
trace = json.load(open(sys.argv[2]))["traceEvents"]
lanes = [g for g in svg.findall("s:g", NS) if g.get("class") == "lane"]
print("lanes:", " ".join(g.get("id").removeprefix("lane-") for g in lanes))
total = 0
for g in lanes:
    stream = g.get("id").removeprefix("lane-")
    boxes = [r for r in g.findall("s:rect", NS) if "op" in r.get("class", "").split()]
    names = [r.find("s:title", NS).text.split(" \u2014 ")[0] for r in boxes]
    tid = STREAMS.index(stream)
    slices = sorted((e for e in trace if e["ph"] == "X" and e["tid"] == tid),
                    key=lambda e: e["ts"])
    if names != [e["name"] for e in slices]:
        sys.exit(f"lane {stream}: boxes {names} are not the trace's slices")
    exposed = sum("exposed" in r.get("class").split() for r in boxes)
    print(f"lane {stream}: {len(boxes)} boxes, as the trace, {exposed} exposed")
    for name in names[:3]:
        print(f"  {name}")
    total += len(boxes)
print("boxes:", total)
for line in svg.findall("s:polyline", NS):
    space = line.get("id").removeprefix("memory-")
    points = [tuple(map(float, p.split(","))) for p in line.get("points").split()]
    counter = [e["args"]["live_bytes"] for e in trace
               if e["ph"] == "C" and e["name"] == f"{space} memory"]
    print(f"memory {space}: {len(points) // 2} steps, trace counter peak {max(counter)} B")
peak = svg.find("s:g[@class='peak']", NS)
for text in peak.findall("s:text", NS):
    print(text.text)
