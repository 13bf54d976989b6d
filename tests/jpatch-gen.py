#!/usr/bin/env python3
"""jpatch-gen.py - documents and checks for the jpatch round-trip tests.

  jpatch-gen.py docs SEED COUNT     print COUNT NDJSON documents, each a
                                    random edit of the one before (seeded)
  jpatch-gen.py check DOCS OUT      OUT line i must equal DOCS line i (deep
                                    equality, numbers by value, booleans
                                    apart); prints the first mismatch
  jpatch-gen.py records SEED N      print one document: N records (objects,
                                    arrays, strings, numbers; ~250 bytes
                                    each), every 97th edited when SEED is
                                    odd (so SEED 2 and 3 differ a little)
  jpatch-gen.py rss CMD ARG...      run CMD (stdout discarded) and print its
                                    peak memory (max RSS) in KB, or -1 when
                                    it fails
"""
import json
import os
import random
import sys

KEYS = ["a", "b", "c", "~", "/", "a/b", "~1", "0", "1", "-", "", "é", "k l"]


def scalar(r):
    return r.choice([None, True, False, 0, 1, -7, 2.5, 1e21, 123456789012,
                     "", "x", "~/", "ünï", "a\u0000b", r.randint(-100, 100),
                     r.random(), 2**63, -2**63 - 1, r.randint(-10**30, 10**30),
                     near(r)])


# Integers past 2^63 that a double cannot tell apart: a document edit that
# changes only their last digits must still give a patch.
BIG = [12345678901234567890, 2**64, -2**63 - 1, 10**24, -(10**30)]


def near(r):
    return r.choice(BIG) + r.randint(-2, 2)


def value(r, depth):
    k = r.random()
    if depth > 3 or k < 0.4:
        return scalar(r)
    if k < 0.7:
        return [value(r, depth + 1) for _ in range(r.randint(0, 6))]
    return {r.choice(KEYS): value(r, depth + 1) for _ in range(r.randint(0, 5))}


def mutate(r, v, depth=0):
    """A random edit: keep most of v, change a few places."""
    k = r.random()
    if k < 0.08:
        return value(r, depth)
    if isinstance(v, list):
        v = list(v)
        for _ in range(r.randint(1, 3)):
            op = r.random()
            if op < 0.3 or not v:
                v.insert(r.randint(0, len(v)), value(r, depth + 1))
            elif op < 0.55:
                del v[r.randrange(len(v))]
            elif op < 0.7:
                i, j = r.randrange(len(v)), r.randrange(len(v))
                v.insert(j, v.pop(i))
            else:
                i = r.randrange(len(v))
                v[i] = mutate(r, v[i], depth + 1)
        return v
    if isinstance(v, dict):
        v = dict(v)
        for _ in range(r.randint(1, 3)):
            op = r.random()
            if op < 0.35 or not v:
                v[r.choice(KEYS)] = value(r, depth + 1)
            elif op < 0.6:
                del v[r.choice(list(v))]
            else:
                key = r.choice(list(v))
                v[key] = mutate(r, v[key], depth + 1)
        return v
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**62:
        return v + r.choice([-1, 1])    # the next integer, same double
    return value(r, depth) if k < 0.5 else v


def same(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def records(seed, n):
    r = random.Random(seed // 2)
    w = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
    recs = [{"id": "rec-%06d" % i, "n": i, "score": round(r.random() * 1000, 3),
             "on": r.random() < 0.5,
             "tags": [r.choice(w) for _ in range(r.randint(1, 5))],
             "owner": {"name": r.choice(w) + " " + r.choice(w),
                       "age": r.randint(18, 90)},
             "note": " ".join(r.choice(w) for _ in range(6)), "extra": None}
            for i in range(n)]
    if seed % 2:
        for i in range(0, n, 97):
            recs[i]["n"] = -1
    return {"meta": {"v": 1}, "records": recs}


def peak_rss(cmd):
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.execvp(cmd[0], cmd)
    _, status, usage = os.wait4(pid, 0)
    return usage.ru_maxrss if os.waitstatus_to_exitcode(status) == 0 else -1


def main():
    if sys.argv[1] == "records":
        print(json.dumps(records(int(sys.argv[2]), int(sys.argv[3])),
                         separators=(",", ":")))
        return 0
    if sys.argv[1] == "rss":
        print(peak_rss(sys.argv[2:]))
        return 0
    if sys.argv[1] == "docs":
        r = random.Random(int(sys.argv[2]))
        doc = None
        for i in range(int(sys.argv[3])):
            # Every so often a fresh document, else an edit of the last.
            doc = value(r, 0) if i % 50 == 0 else mutate(r, doc)
            print(json.dumps(doc, ensure_ascii=False, separators=(",", ":")))
        return 0
    docs = open(sys.argv[2], encoding="utf-8").read().splitlines()
    out = open(sys.argv[3], encoding="utf-8").read().splitlines()
    if len(docs) != len(out):
        print("expected %d documents, got %d" % (len(docs), len(out)))
        return 1
    for i, (d, o) in enumerate(zip(docs, out)):
        if not same(json.loads(d), json.loads(o)):
            print("document %d differs:\n  want %s\n  got  %s" % (i + 1, d, o))
            return 1
    print("%d documents match" % len(docs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
