#!/usr/bin/env python3
"""RESP generator for tools/memory-gate.sh: writes one dataset's commands
to stdout, for `redis-cli --pipe`. No randomness: every byte follows from
the dataset's name, so the committed baseline stays comparable. Kept apart
from bench/types_gen.py on purpose: a change to a benchmark's data must not
move the gate's figures.

  memory_gen.py strings      1,000,000 strings str:<i> = "value:<i>"
  memory_gen.py hashes       100,000 hashes h:<i>, 5 fields f<j> -> v<i>.<j>
  memory_gen.py intsets      100,000 sets si:<i> of 10 integers < 1000
  memory_gen.py strsets      100,000 sets ss:<i> of 10 strings m<i>.<j>
  memory_gen.py zsets        100,000 sorted sets z:<i> of 10 members
  memory_gen.py bigzsets     1,000 sorted sets bz:<i> of 1,000 members
  memory_gen.py lists        100,000 lists l:<i> of 10 elements
  memory_gen.py stream       one stream st of 1,000,000 entries, 3 fields
  memory_gen.py hlls         20,000 HyperLogLogs hll:<i> of 100 elements

`memory_gen.py count NAME` prints what the gate divides by (keys, or
entries for the stream).
"""
import sys
from pathlib import Path

# The RESP writer is bench's; the datasets are this file's own.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from types_gen import cmd, flush  # noqa: E402


def strings(n=1_000_000):
    for i in range(n):
        cmd(b"SET", b"str:%d" % i, b"value:%d" % i)


def hashes(n=100_000):
    for i in range(n):
        args = [b"HSET", b"h:%d" % i]
        for j in range(5):
            args += [b"f%d" % j, b"v%d.%d" % (i, j)]
        cmd(*args)


def intsets(n=100_000):
    # 37 is prime to 1000: ten distinct members, all 16-bit.
    for i in range(n):
        cmd(b"SADD", b"si:%d" % i, *[b"%d" % ((i + 37 * j) % 1000) for j in range(10)])


def strsets(n=100_000):
    for i in range(n):
        cmd(b"SADD", b"ss:%d" % i, *[b"m%d.%d" % (i, j) for j in range(10)])


def zsets(n=100_000):
    for i in range(n):
        args = [b"ZADD", b"z:%d" % i]
        for j in range(10):
            args += [b"%d" % (j * 3 + i % 7), b"m%d" % j]
        cmd(*args)


def bigzsets(k=1_000, m=1_000):
    # Scores are a permutation of 0..m-1 (7919 is prime to 1000), so
    # inserts land all over the skiplist rather than at its tail.
    for i in range(k):
        args = [b"ZADD", b"bz:%d" % i]
        for j in range(m):
            args += [b"%d" % (j * 7919 % m), b"m%d" % j]
        cmd(*args)


def lists(n=100_000):
    for i in range(n):
        cmd(b"RPUSH", b"l:%d" % i, *[b"element-%d" % j for j in range(10)])


def stream(n=1_000_000):
    for i in range(1, n + 1):
        cmd(b"XADD", b"st", b"%d-0" % i, b"name", b"user%d" % (i % 1000),
            b"action", b"click", b"value", b"%d" % (i * 7 % 100000))


def hlls(n=20_000):
    # 100 distinct elements stay far below hll-sparse-max-bytes (3000).
    for i in range(n):
        cmd(b"PFADD", b"hll:%d" % i, *[b"e%d" % (i * 100 + j) for j in range(100)])


DATASETS = {
    "strings": (strings, 1_000_000),
    "hashes": (hashes, 100_000),
    "intsets": (intsets, 100_000),
    "strsets": (strsets, 100_000),
    "zsets": (zsets, 100_000),
    "bigzsets": (bigzsets, 1_000),
    "lists": (lists, 100_000),
    "stream": (stream, 1_000_000),
    "hlls": (hlls, 20_000),
}


def main(argv):
    if len(argv) == 3 and argv[1] == "count" and argv[2] in DATASETS:
        print(DATASETS[argv[2]][1])
        return 0
    if len(argv) == 2 and argv[1] == "names":
        print(" ".join(DATASETS))
        return 0
    if len(argv) != 2 or argv[1] not in DATASETS:
        sys.stderr.write(__doc__)
        return 2
    DATASETS[argv[1]][0]()
    flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
