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
  types_gen.py custom              the keys of the custom throughput tests:
                                   z (1000 members, scores 0..999), za and zb
                                   (100 members each, half shared), geo
                                   (10,000 points in 4 x 3 degrees)
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
    elif what == "cxzset":
        key, n = argv[2].encode(), int(argv[3])
        zadd_batches(key, [(b"%d" % j, b"m:%012d" % j) for j in range(n)])
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
    else:
        sys.stderr.write(__doc__)
        return 2
    flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
