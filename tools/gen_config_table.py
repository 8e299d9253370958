#!/usr/bin/env python3
"""Probes a running real redis-server 7.0 (port in argv[1]) and prints the
option table of server/src/core/config/table.rs: each option's name, type,
range or choices, default and mutability, read from Redis's own replies.
Further arguments name hidden options (CONFIG GET * omits them; Redis's
test suite sets key-load-delay, loading-process-events-interval-bytes,
rdb-key-save-delay, use-exit-on-panic, watchdog-period): they are probed by
name and printed after a blank line, for the HIDDEN table."""
import re, subprocess, sys

port = sys.argv[1]
hidden = sys.argv[2:]

def cli(*args):
    r = subprocess.run(["redis-cli", "-p", port, *args], capture_output=True, text=True)
    return r.stdout.rstrip("\n")

def err(name, value):
    out = cli("config", "set", name, value)
    return out

lines = subprocess.run(["redis-cli", "-p", port, "--no-raw", "config", "get", "*"], capture_output=True, text=True).stdout
vals = re.findall(r'^\s*\d+\) "((?:[^"\\]|\\.)*)"$', lines, re.M)
pairs = dict(zip(vals[0::2], vals[1::2]))
def row(name, cur):
    r = err(name, cur)
    mutable = "true"
    # Protected options (dir, dbfilename) are mutable once
    # enable-protected-configs allows it.
    if "immutable" in r:
        mutable = "false"
    kind = None
    if mutable == "false":
        # CONFIG SET cannot probe these: a server started with a value
        # that is no choice says which it accepts.
        r2 = subprocess.run(["timeout", "5", "redis-server", "--port", "0", f"--{name}", "zz-not-a-choice"],
                            capture_output=True, text=True).stderr
        m = re.search(r"must be one of the following: (.*)$", r2, re.M)
        if m:
            choices = ", ".join(f'"{c}"' for c in m.group(1).strip().split(", "))
            kind = f"Kind::Enum(&[{choices}])"
        elif re.fullmatch(r"-?\d+", cur):
            # ...and one out of every range says its range.
            r3 = subprocess.run(["timeout", "5", "redis-server", "--port", "0", f"--{name}", "-99999999999999999"],
                                capture_output=True, text=True).stderr
            m = re.search(r"between (-?\d+) and (-?\d+) inclusive", r3)
            kind = f"Kind::Int({m.group(1)}, {m.group(2)})" if m else "Kind::Int(i64::MIN, i64::MAX)"
        else:
            kind = "Kind::Bool" if cur in ("yes", "no") else "Kind::Str"
    if kind is None and name in ("requirepass", "masterauth"):
        kind = "Kind::Str"
    if kind is None and cur in ("yes", "no"):
        r2 = err(name, "maybe")
        if "'yes' or 'no'" in r2:
            kind = "Kind::Bool"
    if kind is None and re.fullmatch(r"-?\d+", cur):
        r2 = err(name, "abc")
        mem = "memory value" in r2
        lo = err(name, "-99999999999999999")
        m = re.search(r"between (-?\d+) and (-?\d+) inclusive", lo)
        if not m:
            m = re.search(r"between (-?\d+) and (-?\d+) inclusive", err(name, "99999999999999999"))
        if m:
            lo_, hi_ = m.group(1), m.group(2)
        else:
            lo_, hi_ = "i64::MIN", "i64::MAX"
        kind = f"Kind::{'Memory' if mem else 'Int'}({lo_}, {hi_})"
    if kind is None:
        r2 = err(name, "zz-not-a-choice")
        m = re.search(r"must be one of the following: (.*)$", r2)
        if m:
            choices = ", ".join(f'"{c}"' for c in m.group(1).split(", "))
            kind = f"Kind::Enum(&[{choices}])"
        else:
            kind = "Kind::Str" if r2 == "OK" else "Kind::Special"
    cli("config", "set", name, cur)
    return f'    Opt {{ name: "{name}", kind: {kind}, default: {cur!r}, mutable: {mutable} }},'.replace("'", '"')

print("\n".join(row(n, pairs[n].encode().decode("unicode_escape")) for n in sorted(pairs)))
if hidden:
    print()
    print("\n".join(row(n, cli("config", "get", n).split("\n")[1]) for n in sorted(hidden)))
