#!/usr/bin/env python3
"""gen.py OUTDIR - deterministic inputs for bench/jpatch.sh.

Writes into OUTDIR:
  big.json       ~10 MB document: records with nested objects, arrays,
                 strings, integers and reals (seeded, so every run is equal)
  big2.json      big.json with ~1,200 scattered changes (for diff)
  patch.json     a ~1,200-operation patch for big.json (add/replace/remove/
                 test/copy/move at scattered paths); strict-valid
  stream.ndjson  2,000 patches (agent-style customPatch chunks) growing a
                 ~20 KB state document
  init.json      the initial document for the stream ({})
  tiny.json, tinypatch.json   start-up inputs
"""
import json
import os
import random
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rnd = random.Random(6902)
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf",
         "hotel", "india", "juliet", "kilo", "lima", "mike", "november"]


def text(n):
    return " ".join(rnd.choice(WORDS) for _ in range(n))


def record(i):
    return {
        "id": "rec-%06d" % i,
        "index": i,
        "score": round(rnd.random() * 1000, 3),
        "active": rnd.random() < 0.5,
        "tags": [rnd.choice(WORDS) for _ in range(rnd.randint(1, 5))],
        "owner": {"name": text(2), "email": "%s@example.com" % rnd.choice(WORDS),
                  "age": rnd.randint(18, 90)},
        "history": [{"t": 1700000000 + j * 60, "v": rnd.randint(0, 1 << 40)}
                    for j in range(rnd.randint(0, 4))],
        "note": text(rnd.randint(3, 12)),
        "extra": None,
    }


doc = {"meta": {"version": 3, "generator": "agentkit bench"}, "records": []}
size = 0
i = 0
while size < 10 * 1000 * 1000:
    r = record(i)
    doc["records"].append(r)
    size += len(json.dumps(r, separators=(",", ":"))) + 1
    i += 1
n = len(doc["records"])
with open(os.path.join(out, "big.json"), "w") as f:
    json.dump(doc, f, separators=(",", ":"))

# A strict-valid patch of ~1,200 operations.
ops = []
for k in range(1200):
    i = rnd.randrange(n - 10)
    kind = k % 8
    base = "/records/%d" % i
    if kind in (0, 1):
        ops.append({"op": "replace", "path": base + "/score", "value": k * 1.5})
    elif kind == 2:
        ops.append({"op": "add", "path": base + "/owner/nick", "value": text(2)})
    elif kind == 3:
        ops.append({"op": "add", "path": base + "/tags/0", "value": "new"})
    elif kind == 4:
        ops.append({"op": "test", "path": base + "/index", "value": i})
    elif kind == 5:
        ops.append({"op": "copy", "from": base + "/owner", "path": base + "/owner2"})
    elif kind == 6:
        ops.append({"op": "remove", "path": base + "/extra"})
        ops.append({"op": "add", "path": base + "/extra", "value": {"k": k}})
    else:
        ops.append({"op": "move", "from": base + "/note", "path": base + "/memo"})
        ops.append({"op": "move", "from": base + "/memo", "path": base + "/note"})
with open(os.path.join(out, "patch.json"), "w") as f:
    json.dump(ops, f, separators=(",", ":"))

# big2: ~1,200 scattered edits of big.json.
doc2 = json.loads(json.dumps(doc))
recs = doc2["records"]
for k in range(1200):
    i = rnd.randrange(len(recs))
    kind = k % 4
    if kind == 0:
        recs[i]["score"] = -1.25
    elif kind == 1:
        recs[i]["owner"]["city"] = text(1)
    elif kind == 2:
        recs[i]["tags"].append("x")
    else:
        recs[i].pop("note", None)
with open(os.path.join(out, "big2.json"), "w") as f:
    json.dump(doc2, f, separators=(",", ":"))

# A stream of 2,000 small patches that grows and edits a state document.
with open(os.path.join(out, "stream.ndjson"), "w") as f:
    f.write(json.dumps({"customPatch": [{"op": "replace", "path": "",
                                         "value": {"status": "start", "items": [], "counts": {}}}]}) + "\n")
    for k in range(1, 2000):
        if k % 10 == 0:
            f.write('{"turnEnd":{}}\n')
        if k % 3 == 0 and k > 300:
            p = [{"op": "remove", "path": "/items/0"}]
        elif k % 3 == 1:
            p = [{"op": "add", "path": "/items/-", "value": {"n": k, "text": text(3)}}]
        else:
            p = [{"op": "replace", "path": "/status", "value": "step %d" % k},
                 {"op": "add", "path": "/counts/%s" % rnd.choice(WORDS), "value": k}]
        f.write(json.dumps({"customPatch": p}, separators=(",", ":")) + "\n")
with open(os.path.join(out, "init.json"), "w") as f:
    f.write("{}\n")
with open(os.path.join(out, "tiny.json"), "w") as f:
    f.write('{"a":1,"b":[1,2]}\n')
with open(os.path.join(out, "tiny2.json"), "w") as f:
    f.write('{"a":2,"b":[1,2,3]}\n')
with open(os.path.join(out, "tinypatch.json"), "w") as f:
    f.write('[{"op":"replace","path":"/a","value":2}]\n')
