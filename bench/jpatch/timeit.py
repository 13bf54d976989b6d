#!/usr/bin/env python3
"""timeit.py [--runs N] [--stdin FILE] [--repeat K] [--rss] -- CMD ARG...

Runs CMD (stdout to /dev/null, stderr kept) N times after one warm-up and
prints the median wall time of one run in seconds.  With --repeat K each
timed sample runs CMD K times in a row and is divided by K (for start-up
times near the timer's resolution).  With --rss it also prints the largest
peak resident set size of any run, in kilobytes (the kernel's ru_maxrss of
the process, what /usr/bin/time -v calls "Maximum resident set size").
Exits non-zero if any run fails.
"""
import os
import statistics
import sys
import time


def main():
    args = sys.argv[1:]
    runs, repeat, stdin, rss = 7, 1, None, False
    while args and args[0] != "--":
        opt = args.pop(0)
        if opt == "--runs":
            runs = int(args.pop(0))
        elif opt == "--repeat":
            repeat = int(args.pop(0))
        elif opt == "--stdin":
            stdin = args.pop(0)
        elif opt == "--rss":
            rss = True
    cmd = args[1:]
    devnull = os.open(os.devnull, os.O_WRONLY)
    peak = [0]

    def once():
        fd = os.open(stdin, os.O_RDONLY) if stdin else os.open(os.devnull, os.O_RDONLY)
        t0 = time.perf_counter()
        pid = os.posix_spawnp(cmd[0], cmd, os.environ,
                              file_actions=[(os.POSIX_SPAWN_DUP2, fd, 0),
                                            (os.POSIX_SPAWN_DUP2, devnull, 1)])
        _, status, usage = os.wait4(pid, 0)
        t = time.perf_counter() - t0
        peak[0] = max(peak[0], usage.ru_maxrss)
        os.close(fd)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.stderr.write("timeit: %s failed (%d)\n" % (" ".join(cmd), os.waitstatus_to_exitcode(status)))
            sys.exit(1)
        return t

    once()
    samples = []
    for _ in range(runs):
        samples.append(sum(once() for _ in range(repeat)) / repeat)
    if rss:
        print("%.6f %d" % (statistics.median(samples), peak[0]))
    else:
        print("%.6f" % statistics.median(samples))


if __name__ == "__main__":
    main()
