#!/usr/bin/env python3
"""timeit.py [--runs N] [--stdin FILE] [--repeat K] -- CMD ARG...

Runs CMD (stdout to /dev/null, stderr kept) N times after one warm-up and
prints the median wall time of one run in seconds.  With --repeat K each
timed sample runs CMD K times in a row and is divided by K (for start-up
times near the timer's resolution).  Exits non-zero if any run fails.
"""
import os
import statistics
import sys
import time


def main():
    args = sys.argv[1:]
    runs, repeat, stdin = 7, 1, None
    while args and args[0] != "--":
        opt = args.pop(0)
        if opt == "--runs":
            runs = int(args.pop(0))
        elif opt == "--repeat":
            repeat = int(args.pop(0))
        elif opt == "--stdin":
            stdin = args.pop(0)
    cmd = args[1:]
    devnull = os.open(os.devnull, os.O_WRONLY)

    def once():
        fd = os.open(stdin, os.O_RDONLY) if stdin else os.open(os.devnull, os.O_RDONLY)
        t0 = time.perf_counter()
        pid = os.posix_spawnp(cmd[0], cmd, os.environ,
                              file_actions=[(os.POSIX_SPAWN_DUP2, fd, 0),
                                            (os.POSIX_SPAWN_DUP2, devnull, 1)])
        _, status = os.waitpid(pid, 0)
        t = time.perf_counter() - t0
        os.close(fd)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.stderr.write("timeit: %s failed (%d)\n" % (" ".join(cmd), os.waitstatus_to_exitcode(status)))
            sys.exit(1)
        return t

    once()
    samples = []
    for _ in range(runs):
        samples.append(sum(once() for _ in range(repeat)) / repeat)
    print("%.6f" % statistics.median(samples))


if __name__ == "__main__":
    main()
