#!/usr/bin/env python3
"""Writes server/src/core/command/meta.rs, the command metadata of Redis 7.0.15, from
Redis's own replies recorded in server/src/core/command/command_info.resp (`COMMAND`)
and server/src/core/command/command_docs.resp (`COMMAND DOCS`), both over RESP3.

    tools/gen_command_table.py                 # regenerate meta.rs
    tools/gen_command_table.py --record PORT   # re-record both files first,
                                               # from a redis-server 7.0.15
                                               # listening on 127.0.0.1:PORT

Recording sends `HELLO 3` then the command and stores the reply's bytes as
they came. Each row holds what COMMAND INFO shows (name, arity, flags,
first/last/step, ACL categories, tips, key specs, subcommands) and the
COMMAND DOCS map of the command without its `subcommands` field, as RESP3
bytes (the subcommands' docs are in their own rows)."""
import os, socket, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CMD = os.path.join(ROOT, "server", "src", "core", "command")
INFO = os.path.join(CMD, "command_info.resp")
DOCS = os.path.join(CMD, "command_docs.resp")
OUT = os.path.join(CMD, "meta.rs")

# Command flags as COMMAND INFO lists them, in its order, with their Rust
# names (server/src/core/command/mod.rs, `flags`).
FLAGS = [("write", "WRITE"), ("readonly", "READONLY"), ("denyoom", "DENYOOM"),
         ("admin", "ADMIN"), ("pubsub", "PUBSUB"), ("noscript", "NOSCRIPT"),
         ("blocking", "BLOCKING"), ("loading", "LOADING"), ("stale", "STALE"),
         ("skip_monitor", "SKIP_MONITOR"), ("skip_slowlog", "SKIP_SLOWLOG"),
         ("asking", "ASKING"), ("fast", "FAST"), ("no_auth", "NO_AUTH"),
         ("no_mandatory_keys", "NO_MANDATORY_KEYS"),
         ("no_async_loading", "NO_ASYNC_LOADING"), ("no_multi", "NO_MULTI"),
         ("movablekeys", "MOVABLE_KEYS"), ("allow_busy", "ALLOW_BUSY")]
# Key-spec flags, in the order COMMAND INFO lists them (`key_flags`).
KEY_FLAGS = [("RO", "RO"), ("RW", "RW"), ("OW", "OW"), ("RM", "RM"),
             ("access", "ACCESS"), ("update", "UPDATE"), ("insert", "INSERT"),
             ("delete", "DELETE"), ("not_key", "NOT_KEY"),
             ("incomplete", "INCOMPLETE"), ("variable_flags", "VARIABLE_FLAGS")]


def record(port):
    for path, cmd in ((INFO, [b"COMMAND"]), (DOCS, [b"COMMAND", b"DOCS"])):
        s = socket.create_connection(("127.0.0.1", int(port)))
        f = s.makefile("rb")
        for req in ([b"HELLO", b"3"], cmd):
            s.sendall(b"*%d\r\n" % len(req) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in req))
            raw = bytearray()
            read_reply(f, raw)
        open(path, "wb").write(raw)
        s.close()


def read_reply(f, raw):
    line = f.readline()
    raw += line
    t, head = line[:1], line[1:-2]
    if t in b"$=":
        data = f.read(int(head) + 2)
        raw += data
    elif t in b"*~>":
        for _ in range(int(head)):
            read_reply(f, raw)
    elif t == b"%":
        for _ in range(2 * int(head)):
            read_reply(f, raw)


def parse(b, i=0):
    """One RESP3 value at b[i:]: (kind, value), next index."""
    t = b[i:i + 1]
    j = b.index(b"\r\n", i)
    head = b[i + 1:j]
    i = j + 2
    if t == b"$":
        n = int(head)
        return ("bulk", b[i:i + n]), i + n + 2
    if t == b"+":
        return ("simple", head), i
    if t == b":":
        return ("int", int(head)), i
    if t in (b"*", b"~", b"%"):
        n = int(head) * (2 if t == b"%" else 1)
        out = []
        for _ in range(n):
            v, i = parse(b, i)
            out.append(v)
        if t == b"%":
            return ("map", list(zip(out[0::2], out[1::2]))), i
        return ("array" if t == b"*" else "set", out), i
    raise ValueError("unexpected RESP type %r" % t)


def encode(v):
    kind, x = v
    if kind == "bulk":
        return b"$%d\r\n%s\r\n" % (len(x), x)
    if kind == "simple":
        return b"+%s\r\n" % x
    if kind == "int":
        return b":%d\r\n" % x
    if kind in ("array", "set"):
        return (b"*" if kind == "array" else b"~") + b"%d\r\n" % len(x) + b"".join(map(encode, x))
    return b"%%%d\r\n" % len(x) + b"".join(encode(k) + encode(w) for k, w in x)


def field(m, name):
    return next(v for k, v in m[1] if k[1] == name.encode())


def rust_str(b):
    return '"' + b.decode().replace("\\", "\\\\").replace('"', '\\"') + '"'


def rust_bytes(b):
    out = []
    for c in b:
        ch = chr(c)
        if ch == "\\" or ch == '"':
            out.append("\\" + ch)
        elif 0x20 <= c < 0x7f:
            out.append(ch)
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\n":
            out.append("\\n")
        else:
            out.append("\\x%02x" % c)
    return 'b"' + "".join(out) + '"'


def bits(names, table, what):
    known = [n for n, _ in table]
    pos = [known.index(n) for n in names]  # fails on a flag not in `table`
    assert pos == sorted(pos), "%s out of order: %s" % (what, names)
    return " | ".join(table[p][1] for p in pos) or "0"


def key_spec(s):
    notes = [v[1] for k, v in s[1] if k[1] == b"notes"]
    kf = bits([f[1].decode() for f in field(s, "flags")[1]], [(n, "K::" + r) for n, r in KEY_FLAGS], "key flags")
    bs, fk = field(s, "begin_search"), field(s, "find_keys")
    bspec, fspec = field(bs, "spec"), field(fk, "spec")
    num = lambda m, n: field(m, n)[1]
    begin = {
        b"index": lambda: "Begin::Index(%d)" % num(bspec, "index"),
        b"keyword": lambda: "Begin::Keyword(%s, %d)" % (rust_str(field(bspec, "keyword")[1]), num(bspec, "startfrom")),
        b"unknown": lambda: "Begin::Unknown",
    }[field(bs, "type")[1]]()
    find = {
        b"range": lambda: "Find::Range { lastkey: %d, keystep: %d, limit: %d }" % tuple(num(fspec, n) for n in ("lastkey", "keystep", "limit")),
        b"keynum": lambda: "Find::Keynum { keynumidx: %d, firstkey: %d, keystep: %d }" % tuple(num(fspec, n) for n in ("keynumidx", "firstkey", "keystep")),
        b"unknown": lambda: "Find::Unknown",
    }[field(fk, "type")[1]]()
    return "KeySpec { notes: %s, flags: %s, begin: %s, find: %s }" % (
        rust_str(notes[0]) if notes else '""', kf, begin, find)


def row(info, docs, indent):
    (_, name), (_, arity), (_, fl), (_, first), (_, last), (_, step), (_, acl), (_, tips), (_, specs), (kind, subs) = info[1]
    doc = docs[name]
    own_docs = ("map", [(k, v) for k, v in doc[1] if k[1] != b"subcommands"])
    sub_docs = dict((k[1], v) for k, v in field(doc, "subcommands")[1]) if kind == "array" else {}
    # COMMAND INFO shows an empty set for a command without subcommands.
    assert (kind == "array") == bool(subs)
    pad = " " * indent
    out = [pad + "Meta {",
           pad + "    name: %s," % rust_str(name),
           pad + "    arity: %d," % arity,
           pad + "    flags: %s," % bits([f[1].decode() for f in fl], FLAGS, "flags"),
           pad + "    first_key: %d, last_key: %d, step: %d," % (first, last, step),
           pad + "    acl: &[%s]," % ", ".join(rust_str(a[1]) for a in acl),
           pad + "    tips: &[%s]," % ", ".join(rust_str(t[1]) for t in tips),
           pad + "    docs: %s," % rust_bytes(encode(own_docs))]
    if specs:
        out.insert(-1, pad + "    specs: &[")
        out[-1:-1] = [pad + "        " + key_spec(s) + "," for s in specs]
        out.insert(-1, pad + "    ],")
    else:
        out.insert(-1, pad + "    specs: &[],")
    if subs:
        out.append(pad + "    subs: &[")
        for s in sorted(subs, key=lambda s: s[1][0][1]):
            out.append(row(s, sub_docs, indent + 8) + ",")
        out.append(pad + "    ],")
    else:
        out.append(pad + "    subs: &[],")
    out.append(pad + "}")
    return "\n".join(out)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--record":
        record(sys.argv[2])
    info, _ = parse(open(INFO, "rb").read())
    docs, _ = parse(open(DOCS, "rb").read())
    docs = dict((k[1], v) for k, v in docs[1])
    rows = sorted(info[1], key=lambda e: e[1][0][1])
    with open(OUT, "w") as f:
        f.write("// Generated by tools/gen_command_table.py from Redis 7.0.15's COMMAND and\n"
                "// COMMAND DOCS (command_info.resp, command_docs.resp). Do not edit.\n\n"
                "//! Every command of Redis 7.0.15, sorted by name, as Redis describes it.\n\n"
                "use super::flags::*;\n"
                "use super::key_flags as K;\n"
                "use super::{Begin, Find, KeySpec, Meta};\n\n"
                "pub static META: &[Meta] = &[\n")
        for e in rows:
            f.write(row(e, docs, 4) + ",\n")
        f.write("];\n")


main()
