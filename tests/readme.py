#!/usr/bin/env python3
"""readme.py - the README's shell blocks, for tests/readme.bats.

  readme.py list FILE         one line per ```sh block: LINE<TAB>STATUS
                              (run, or "skip: why")
  readme.py script FILE LINE  the block starting at LINE, as a script
  readme.py expect FILE LINE  the output shown under it (a ```text block
                              right after it), or nothing
  readme.py check FILE LINE OUTPUT_FILE
                              compare OUTPUT_FILE with the shown output:
                              line by line, "..." matching any text

A block is a fence "```sh" ... "```".  Its first comment lines may say
"# needs: VAR" (skipped unless VAR is set) or "# not run by the doc
test: WHY" (skipped, with WHY; "README test" is read the same).  Other fences (```text, ```console) are
never run.
"""
import os
import re
import sys


def blocks(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        lang, start, body = m.group(1), i + 1, []
        i += 1
        while i < len(lines) and lines[i] != "```":
            body.append(lines[i])
            i += 1
        out.append((lang, start, body))
        i += 1
    # a ```text block with only blank lines before it is the shown output
    result = []
    for k, (lang, start, body) in enumerate(out):
        if lang != "sh":
            continue
        shown = None
        if k + 1 < len(out) and out[k + 1][0] == "text":
            between = open(path, encoding="utf-8").read().split("\n")[start + len(body):out[k + 1][1] - 1]
            if all(not l.strip() or l == "```" for l in between):
                shown = out[k + 1][2]
        result.append((start, body, shown))
    return result


def status(body):
    for l in body:
        if not l.startswith("#"):
            break
        m = re.match(r"#\s*needs:\s*(\S+)", l)
        if m and not os.environ.get(m.group(1)):
            return "skip: needs " + m.group(1)
        m = re.match(r"#\s*not run by the (?:README|doc) test:\s*(.*)", l)
        if m:
            return "skip: " + m.group(1)
    return "run"


def shown_name(path):
    """path as named from the repository's top when it is inside it"""
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    full = os.path.abspath(path)
    return os.path.relpath(full, top) if full.startswith(top + os.sep) else path


def find(path, line):
    for b in blocks(path):
        if b[0] == int(line):
            return b
    sys.exit("readme.py: no sh block at %s:%s" % (path, line))


def main(argv):
    cmd, path = argv[1], argv[2]
    if cmd == "list":
        for start, body, _ in blocks(path):
            print("%d\t%s" % (start, status(body)))
    elif cmd == "script":
        print("\n".join(find(path, argv[3])[1]))
    elif cmd == "expect":
        shown = find(path, argv[3])[2]
        if shown is not None:
            print("\n".join(shown))
    elif cmd == "check":
        shown = find(path, argv[3])[2]
        got = open(argv[4], encoding="utf-8").read().split("\n")
        if got and got[-1] == "":
            got.pop()
        if shown is None:
            return 0
        bad = len(got) != len(shown)
        for want, have in zip(shown, got):
            rx = ".*".join(re.escape(p) for p in want.split("..."))
            if not re.fullmatch(rx, have):
                bad = True
        if bad:
            print("%s:%s: the output differs from the one shown\n--- shown\n%s\n--- printed\n%s"
                  % (shown_name(path), argv[3], "\n".join(shown), "\n".join(got)))
            return 1
    else:
        sys.exit("readme.py: unknown command " + cmd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
