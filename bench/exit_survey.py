#!/usr/bin/env python3
"""How many functions of an object could have return probes at their exits?

A survey for the design of return probes (docs/DESIGN-NOTES.md, "Next: return probes at the
function's exits"): for every function symbol of OBJECT (objdump -d), each `ret` needs a
5-byte jump-path region of whole instructions ending with it, with no branch target inside
but at its first byte and no call, jump or padding in it. Tail jumps (a jmp out of the
function, direct or indirect) are counted apart: they would keep today's hijacked return
address. An estimate from objdump's text, not liveprobe's own decoder.

    python3 bench/exit_survey.py OBJECT...
"""
import collections
import re
import subprocess
import sys

LINE = re.compile(r'^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$')
HEAD = re.compile(r'^([0-9a-f]+) <(.+)>:$')
TARGET = re.compile(r'^([0-9a-f]+) <')


def functions(path):
    out = subprocess.run(['objdump', '-d', '--no-show-raw-insn', '-M', 'att', path],
                         capture_output=True, text=True, check=True).stdout
    cur = None
    for line in out.splitlines():
        m = HEAD.match(line)
        if m:
            if cur:
                yield cur
            cur = (m.group(2), [])
            continue
        m = LINE.match(line)
        if m and cur:
            cur[1].append((int(m.group(1), 16), m.group(2), m.group(3)))
    if cur:
        yield cur


def ret_region_ok(i, insns, lens, targets):
    """A region of >= 5 bytes ending with the ret at i, entered only at its first byte."""
    length = lens[i]
    if insns[i][0] in targets:
        return length >= 5
    j = i
    while length < 5:
        j -= 1
        if j < 0:
            return False
        _, mn, _ = insns[j]
        if mn.startswith(('call', 'j', 'ret', 'loop', 'nop', 'int3')):
            return False
        length += lens[j]
        if insns[j][0] in targets:
            return length >= 5  # the region starts at the branch target
    return True


def survey(path):
    s = collections.Counter()
    for name, insns in functions(path):
        if not insns or name.endswith('@plt') or '.cold' in name:
            continue
        start, last = insns[0][0], insns[-1][0]
        lens = [insns[k + 1][0] - insns[k][0] for k in range(len(insns) - 1)] + [1]
        end = last + lens[-1]
        targets = set()
        tail = False
        for _, mn, op in insns:
            t = TARGET.match(op)
            if mn.startswith(('j', 'call', 'loop')) and t:
                targets.add(int(t.group(1), 16))
            if mn.startswith('jmp') and (op.startswith('*') or (t and not start <= int(t.group(1), 16) < end)):
                tail = True
        rets = [k for k, (_, mn, _) in enumerate(insns) if mn.startswith('ret')]
        s['functions'] += 1
        ok = [ret_region_ok(k, insns, lens, targets) for k in rets]
        s['rets'] += len(rets)
        s['rets that can be a region'] += sum(ok)
        if tail:
            s['functions with a tail jump'] += 1
        if rets and all(ok):
            s['functions whose every ret can be a region'] += 1
            if not tail:
                s['... and no tail jump'] += 1
    return s


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ('-h', '--help'):
        print(__doc__.strip())
        return 2
    for path in sys.argv[1:]:
        s = survey(path)
        n = max(s['functions'], 1)
        print(path)
        for k in ('functions', 'rets', 'rets that can be a region', 'functions with a tail jump',
                  'functions whose every ret can be a region', '... and no tail jump'):
            pct = '' if k in ('functions', 'rets') else f"  ({100 * s[k] / (s['rets'] if k.startswith('rets') else n):.0f}%)"
            print(f'  {k:44} {s[k]:6}{pct}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
