#!/usr/bin/env python3
"""Masks what changes from run to run in a trace's JSON or Chrome output, for a comparison with
a golden file (tests/golden/), as uftrace's tests do: times and durations become T and D;
process and thread ids become PID1, PID2, ... and TID1, TID2, ... in order of appearance
(so the golden file still shows which events share a process or a thread), in numbers and in
the names Chrome's metadata gives a gone process or thread ("process PID2", "thread TID3").

    mask_trace.py FILE   (the masked text on stdout)
"""
import re
import sys

pids, tids = {}, {}


def name(table, prefix, n):
    return table.setdefault(n, f"{prefix}{len(table) + 1}")


def mask(line):
    line = re.sub(r'"(time_ns|ts)":[0-9.]+', r'"\1":T', line)
    line = re.sub(r'"(duration_ns|dur)":[0-9.]+', r'"\1":D', line)
    line = re.sub(r'"pid":([0-9]+)', lambda m: '"pid":' + name(pids, "PID", m.group(1)), line)
    line = re.sub(r'"tid":([0-9]+)', lambda m: '"tid":' + name(tids, "TID", m.group(1)), line)
    line = re.sub(r'"process ([0-9]+)"', lambda m: '"process ' + name(pids, "PID", m.group(1)) + '"', line)
    return re.sub(r'"thread ([0-9]+)"', lambda m: '"thread ' + name(tids, "TID", m.group(1)) + '"', line)


with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        sys.stdout.write(mask(line))
