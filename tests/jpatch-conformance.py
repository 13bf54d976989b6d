#!/usr/bin/env python3
"""jpatch-conformance.py - run json-patch-tests cases through jpatch-apply.

    jpatch-conformance.py SUITE.json [--lenient]

Each case (doc, patch, expected | error, optional disabled/comment) is run
as `jpatch-apply DOC PATCH` (the binary found on PATH).  A case with
"expected" must exit 0 and print a document deeply equal to it (numbers by
value, booleans apart from numbers); a case with "error" must exit non-zero
with nothing on stdout; a case with neither must exit 0.  Disabled cases are
counted and skipped.  Prints one line per failure and a summary
"N passed, N failed, N disabled"; exits 1 on any failure.
"""
import json
import os
import subprocess
import sys
import tempfile


def same(a, b):
    """Deep JSON equality: 1 == 1.0, but true != 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def main():
    suite = sys.argv[1]
    extra = sys.argv[2:]
    cases = json.load(open(suite))
    passed = failed = disabled = 0
    with tempfile.TemporaryDirectory() as tmp:
        docf = os.path.join(tmp, "doc.json")
        patchf = os.path.join(tmp, "patch.json")
        for i, case in enumerate(cases):
            if case.get("disabled"):
                disabled += 1
                continue
            with open(docf, "w") as f:
                json.dump(case["doc"], f)
            with open(patchf, "w") as f:
                json.dump(case["patch"], f)
            r = subprocess.run(["jpatch-apply", *extra, docf, patchf],
                               capture_output=True, text=True)
            name = "case %d (%s)" % (i, case.get("comment", "no comment"))
            why = None
            if "error" in case:
                if r.returncode == 0 or r.stdout:
                    why = "expected an error (%s), got exit %d: %s" % (
                        case["error"], r.returncode, r.stdout.strip())
                elif r.returncode not in (1, 101) or not r.stderr.startswith("jpatch-apply: "):
                    why = "bad failure: exit %d: %s" % (r.returncode, r.stderr.strip())
            elif r.returncode != 0:
                why = "exit %d: %s" % (r.returncode, r.stderr.strip())
            elif "expected" in case:
                try:
                    got = json.loads(r.stdout)
                except ValueError as e:
                    got = e
                if not same(got, case["expected"]):
                    why = "got %s, expected %s" % (r.stdout.strip(),
                                                   json.dumps(case["expected"]))
            if why:
                failed += 1
                print("FAIL %s: %s" % (name, why))
            else:
                passed += 1
    print("%d passed, %d failed, %d disabled" % (passed, failed, disabled))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
