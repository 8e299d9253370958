#!/usr/bin/env python3
"""The load of tools/instr-gate.sh: the same bytes for both servers, run
after run, so that the instruction count per request is a function of the
server alone.

  instr-gate-load.py PORT preload N   the keys the tests read (below)
  instr-gate-load.py PORT run N WORD...
      N requests on one connection, each sent whole and its replies read
      before the next is sent (-c 1 -P 1: the server reads each request in
      one read, however busy the machine). WORD... is one command, or
      several separated by ';;', sent in one write as one request (MULTI
      ... EXEC). In a word, {EXPR} is replaced by the Python expression's
      value for the request's index i (0..N-1): keys and members are a
      function of i, never random, so the hash tables grow the same way
      each run.

Exits non-zero if a reply is an error (a gate must not measure a typo).
"""
import hashlib
import random
import re
import socket
import sys

# The seeds' red-envelope grab (shared/seeds/001): a user who has already
# grabbed gets '1'; else one envelope is popped, the user's id added to its
# JSON, the user recorded and the envelope kept in the detail list.
GRAB = """if redis.call('hexists', KEYS[3], KEYS[4]) ~= 0 then
return '1';
else
local hb = redis.call('rpop', KEYS[1]);
if hb then
local x = cjson.decode(hb);
x['userId'] = KEYS[4];
local re = cjson.encode(x);
redis.call('hset', KEYS[3], KEYS[4], '1');
redis.call('lpush', KEYS[2], re);
return re;
else
return '0';end
end
return nil"""
GRAB_SHA = hashlib.sha1(GRAB.encode()).hexdigest()


def encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.pos = 0

    def _line(self):
        while True:
            end = self.buf.find(b"\r\n", self.pos)
            if end >= 0:
                line = self.buf[self.pos:end]
                self.pos = end + 2
                return line
            self._fill()

    def _fill(self):
        self.buf = self.buf[self.pos:]
        self.pos = 0
        chunk = self.s.recv(1 << 16)
        if not chunk:
            raise SystemExit("connection closed by the server")
        self.buf += chunk

    def reply(self):
        """Reads one reply; returns it (errors as ('err', text))."""
        line = self._line()
        t, rest = line[:1], line[1:]
        if t in (b"+", b":", b",", b"#", b"(", b"_"):
            return rest
        if t in (b"-", b"!"):
            return ("err", rest.decode(errors="replace"))
        if t in (b"$", b"="):
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) - self.pos < n + 2:
                self._fill()
            v = self.buf[self.pos:self.pos + n]
            self.pos += n + 2
            return v
        if t in (b"*", b"%", b"~", b">"):
            n = int(rest)
            if n < 0:
                return None
            if t == b"%":
                n *= 2
            return [self.reply() for _ in range(n)]
        raise SystemExit("bad reply: %r" % line)

    def send(self, data):
        self.s.sendall(data)

    def call(self, *args):
        self.send(encode(args))
        return check(self.reply(), args)


def check(r, what):
    if isinstance(r, tuple):
        raise SystemExit("error reply to %r: %s" % (what[:4], r[1]))
    if isinstance(r, list):
        for x in r:
            check(x, what)
    return r


def bulk(conn, cmds, batch=500):
    """Pipelined preload: `batch` commands per write."""
    for k in range(0, len(cmds), batch):
        part = cmds[k:k + batch]
        conn.send(b"".join(encode(c) for c in part))
        for c in part:
            check(conn.reply(), c)


def spread(key, count, members, per_cmd=100):
    """Commands that fill key:0..count-1 with members(k) in turn: member j
    goes to key:(j % count), as the tests' {i%count} keys consume them."""
    cmds = []
    for base in range(0, len(members), per_cmd * count):
        for k in range(count):
            part = members[base + k:base + per_cmd * count:count]
            if part:
                cmds.append(key(k) + tuple(part))
    return cmds


def preload(conn, n):
    """The keys the tests read, for n requests of each. Rows that read
    one key read one of several in turn instead ({i%10}): the keyspace's
    and the skiplists' hash seeds and level draws are per process, and a
    single key's bucket chain or a single skiplist's shape would move its
    row from run to run; over several keys it averages out."""
    rnd = random.Random(29)
    cmds = []
    # GET's keys; RPOP's lists, SPOP's sets, XREADGROUP's entries, one
    # element per request.
    cmds += [("SET", "gk:%d" % i, "xxx") for i in range(n)]
    cmds += spread(lambda k: ("RPUSH", "rl:%d" % k), 100, ["e:%d" % j for j in range(n)])
    cmds += spread(lambda k: ("SADD", "sp:%d" % k), 10, ["m:%d" % j for j in range(n)])
    cmds += [("XADD", "xg", "%d-0" % (i + 1), "name", "u", "action", "click") for i in range(n)]
    cmds.append(("XGROUP", "CREATE", "xg", "g", "0"))
    # LRANGE's 100 elements; HGETALL's small (listpack) hashes of 10 fields.
    cmds.append(("RPUSH", "l100") + tuple("element-%d" % j for j in range(100)))
    for k in range(100):
        cmds.append(("HSET", "hs:%d" % k) + tuple(x for j in range(10) for x in ("f%d" % j, "v%d" % j)))
    # 8 sorted sets of 100,000 members (skiplists): member m:<j>, score j.
    for z in range(8):
        for k in range(0, 100000, 1000):
            args = ["ZADD", "zbig:%d" % z]
            for j in range(k, k + 1000):
                args += [j, "m:%d" % j]
            cmds.append(tuple(args))
    # 8 sets of 10,000 points in a 1 x 1 degree square: GEOSEARCH's 5 km
    # radius holds ~80 of them.
    for g in range(8):
        for k in range(0, 10000, 500):
            args = ["GEOADD", "geo:%d" % g]
            for j in range(k, k + 500):
                args += ["%.6f" % (13.5 + rnd.random()), "%.6f" % (37.0 + rnd.random()), "p:%d" % j]
            cmds.append(tuple(args))
    # PFCOUNT's HyperLogLog: 20,000 elements, dense.
    cmds += [("PFADD", "hll:a") + tuple("a:%d" % j for j in range(k, k + 1000))
             for k in range(0, 20000, 1000)]
    # The envelopes: one per grab, JSON as the seed's generator makes
    # them, in 10 pools.
    cmds += spread(lambda k: ("LPUSH", "hb:pool:%d" % k), 10,
                   ['{"hbId":%d,"amount":%d}' % (j, 1 + rnd.randrange(2000)) for j in range(n)])
    bulk(conn, cmds)
    sha = conn.call("SCRIPT", "LOAD", GRAB).decode()
    if sha != GRAB_SHA:
        raise SystemExit("SCRIPT LOAD returned %s, not %s" % (sha, GRAB_SHA))


FIELD = re.compile(r"\{([^}]*)\}")


def template(words):
    """WORD... -> a function of i giving the request's bytes, and the
    number of replies it gets."""
    groups, cur = [], []
    for w in words:
        if w == ";;":
            groups.append(cur)
            cur = []
        else:
            cur.append(w)
    groups.append(cur)
    parts = []
    for g in groups:
        for w in g:
            w = w.replace("@GRAB", GRAB_SHA)
            parts.append((w, [compile(e, "{}", "eval") for e in FIELD.findall(w)]))
    sizes = [len(g) for g in groups]

    def make(i):
        env = {"i": i}
        out, k = [], 0
        for size in sizes:
            args = []
            for w, exprs in parts[k:k + size]:
                if exprs:
                    vals = iter([str(eval(e, {}, env)) for e in exprs])
                    w = FIELD.sub(lambda _m: next(vals), w)
                args.append(w)
            out.append(encode(args))
            k += size
        return b"".join(out)

    return make, len(groups)


def run(conn, n, words):
    make, replies = template(words)
    reqs = [make(i) for i in range(n)]
    for req in reqs:
        conn.send(req)
        for _ in range(replies):
            check(conn.reply(), words)


def main():
    port, mode, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    conn = Conn(port)
    if mode == "preload":
        preload(conn, n)
    elif mode == "run":
        run(conn, n, sys.argv[4:])
    else:
        raise SystemExit("mode: preload or run")


if __name__ == "__main__":
    main()
