#!/usr/bin/env python3
"""RESP generator for bench/types.sh: writes commands to stdout, to be fed
to `redis-cli --pipe`. Both servers get byte-identical input.

  types_gen.py hashes N            N hashes h:<i>, 10 fields f<j> -> v<i>.<j>
  types_gen.py intsets N           N sets s:<i> of 20 small integers (intset)
  types_gen.py zsets N             N sorted sets z:<i> of 10 members (listpack)
  types_gen.py bigzsets K M        K sorted sets bz:<i> of M members (skiplist),
                                   ZADD in batches of 1000 members
  types_gen.py cxzset KEY N        one sorted set of N members m:<12 digits>
                                   (the form redis-benchmark's -r __rand_int__
                                   produces) with score = index
  types_gen.py stream N            one stream st of N entries with 3 fields
                                   (IDs 1-0 .. N-0)
  types_gen.py hlls N              N HyperLogLogs hll:<i> of 1000 elements
                                   (sparse), one PFADD each
  types_gen.py lists K N D         K lists l:<i> of N elements element-<j>
                                   made with list-compress-depth D
  types_gen.py custom              the keys of the custom throughput tests:
                                   z (1000 members, scores 0..999), za and zb
                                   (100 members each, half shared), geo
                                   (10,000 points in 4 x 3 degrees); streams
                                   xr (1000 entries) and xg (300,000 entries,
                                   group g at 0-0), IDs <i>-0, 3 fields; the
                                   HyperLogLogs hll:a and hll:b (1000
                                   elements, sparse) and hll:c (20000, dense)
"""
import random
import sys

OUT = sys.stdout.buffer
BUF = []
BUF_BYTES = 0


def cmd(*args):
    """Appends one command in RESP; flushes in ~1MB chunks."""
    global BUF_BYTES
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        if not isinstance(a, bytes):
            a = str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    s = b"".join(parts)
    BUF.append(s)
    BUF_BYTES += len(s)
    if BUF_BYTES > 1 << 20:
        flush()


def flush():
    global BUF_BYTES
    OUT.write(b"".join(BUF))
    BUF.clear()
    BUF_BYTES = 0


def zadd_batches(key, pairs, batch=1000):
    for i in range(0, len(pairs), batch):
        args = [b"ZADD", key]
        for score, member in pairs[i:i + batch]:
            args.append(score)
            args.append(member)
        cmd(*args)


def stream(key, n):
    """A stream of n entries <i>-0 with the same 3 fields."""
    for i in range(1, n + 1):
        cmd(b"XADD", key, b"%d-0" % i, b"name", b"user%d" % (i % 1000),
            b"action", b"click", b"value", b"%d" % (i * 7 % 100000))


def main(argv):
    what = argv[1] if len(argv) > 1 else ""
    if what == "hashes":
        for i in range(int(argv[2])):
            args = [b"HSET", b"h:%d" % i]
            for j in range(10):
                args += [b"f%d" % j, b"v%d.%d" % (i, j)]
            cmd(*args)
    elif what == "intsets":
        for i in range(int(argv[2])):
            cmd(b"SADD", b"s:%d" % i, *[b"%d" % ((i + 37 * j) % 1000) for j in range(20)])
    elif what == "zsets":
        for i in range(int(argv[2])):
            args = [b"ZADD", b"z:%d" % i]
            for j in range(10):
                args += [b"%d" % (j * 3 + i % 7), b"m%d" % j]
            cmd(*args)
    elif what == "bigzsets":
        k, m = int(argv[2]), int(argv[3])
        for i in range(k):
            # A permutation of 0..m-1 as scores, so inserts land all over.
            step = 7919 if m % 7919 else 7907
            pairs = [(b"%d" % (j * step % m), b"m%d" % j) for j in range(m)]
            zadd_batches(b"bz:%d" % i, pairs)
    elif what == "lists":
        k, n = int(argv[2]), int(argv[3])
        cmd(b"CONFIG", b"SET", b"list-compress-depth", argv[4].encode())
        for i in range(k):
            for j in range(0, n, 1000):
                cmd(b"RPUSH", b"l:%d" % i, *[b"element-%d" % e for e in range(j, min(n, j + 1000))])
    elif what == "cxzset":
        key, n = argv[2].encode(), int(argv[3])
        zadd_batches(key, [(b"%d" % j, b"m:%012d" % j) for j in range(n)])
    elif what == "stream":
        stream(b"st", int(argv[2]))
    elif what == "hlls":
        for i in range(int(argv[2])):
            cmd(b"PFADD", b"hll:%d" % i, *[b"%d" % (i * 1000 + j) for j in range(1000)])
    elif what == "custom":
        zadd_batches(b"z", [(b"%d" % j, b"m%d" % j) for j in range(1000)])
        zadd_batches(b"za", [(b"%d" % j, b"m%d" % j) for j in range(100)])
        zadd_batches(b"zb", [(b"%d" % j, b"m%d" % j) for j in range(50, 150)])
        rng = random.Random(1)
        pts = [(rng.uniform(12, 16), rng.uniform(36, 39)) for _ in range(10000)]
        for i in range(0, len(pts), 500):
            args = []
            for j, (lon, lat) in enumerate(pts[i:i + 500], i):
                args += [b"%.6f" % lon, b"%.6f" % lat, b"p%d" % j]
            cmd(b"GEOADD", b"geo", *args)
        stream(b"xr", 1000)
        stream(b"xg", 300000)
        cmd(b"XGROUP", b"CREATE", b"xg", b"g", b"0")
        for key, n in ((b"hll:a", 1000), (b"hll:b", 1000), (b"hll:c", 20000)):
            for i in range(0, n, 1000):
                cmd(b"PFADD", key, *[b"%s:%d" % (key, j) for j in range(i, i + 1000)])
    else:
        sys.stderr.write(__doc__)
        return 2
    flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
