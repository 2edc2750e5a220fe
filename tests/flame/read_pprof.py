#!/usr/bin/env python3
"""Read a gzipped pprof profile with Google's profile.proto (compiled by protoc into
profile_pb2 on PYTHONPATH; scripts/install-flame-tools.sh) and print a JSON summary: the sample
types, the period, totals, the 20 top leaf locations by cpu with their lines (innermost
first), and every sample's locations (leaf first), each with its lines.
Checks every reference (location, function and string ids) and fails on any dangling one."""
import gzip
import json
import sys

import profile_pb2

p = profile_pb2.Profile()
p.ParseFromString(gzip.decompress(open(sys.argv[1], "rb").read()))
s = p.string_table
assert s[0] == "", "string_table[0] must be empty"
functions = {f.id: f for f in p.function}
locations = {l.id: l for l in p.location}
for f in p.function:
    assert 0 <= f.name < len(s) and 0 <= f.filename < len(s)
types = [[s[t.type], s[t.unit]] for t in p.sample_type]
cpu = types.index(["cpu", "nanoseconds"])
count = types.index(["samples", "count"])
by_leaf = {}
cpu_total = samples_total = 0
for x in p.sample:
    assert x.location_id, "a sample with no location"
    for lid in x.location_id:
        assert lid in locations, f"dangling location {lid}"
    by_leaf[x.location_id[0]] = by_leaf.get(x.location_id[0], 0) + x.value[cpu]
    cpu_total += x.value[cpu]
    samples_total += x.value[count]
for l in p.location:
    for ln in l.line:
        assert ln.function_id in functions, f"dangling function {ln.function_id}"
leaves = sorted(by_leaf, key=by_leaf.get, reverse=True)[:20]


def line(ln):
    f = functions[ln.function_id]
    return {"function": s[f.name], "file": s[f.filename], "line": ln.line}


print(json.dumps({
    "sample_types": types,
    "period_type": [s[p.period_type.type], s[p.period_type.unit]],
    "period": p.period,
    "cpu_total": cpu_total,
    "samples_total": samples_total,
    "leaves": [{"cpu": by_leaf[i], "lines": [line(ln) for ln in locations[i].line]} for i in leaves],
    "stacks": [{"cpu": x.value[cpu], "locations": [[line(ln) for ln in locations[i].line] for i in x.location_id]} for x in p.sample],
}))
