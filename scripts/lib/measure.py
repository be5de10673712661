#!/usr/bin/env python3
"""Runs a command and measures it as the benchmark scripts report it.

    measure.py OUT -- COMMAND [ARGS...]

Writes one line to OUT: wall seconds, peak RSS (KiB, from the kernel's
rusage: anonymous memory and the file pages mapped, such as an LMDB
database read through mmap), user and system CPU seconds, and the peak of
RssAnon (KiB, the process's own heap and stacks: sampled from
/proc/PID/status every 2 ms). Standard streams pass through; the exit
status is the command's.
"""

import os
import subprocess
import sys
import time


def anon_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main():
    out, sep, command = sys.argv[1], sys.argv[2], sys.argv[3:]
    assert sep == "--" and command, __doc__
    start = time.monotonic()
    child = subprocess.Popen(command)
    peak_anon = 0
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        peak_anon = max(peak_anon, anon_kib(child.pid))
        time.sleep(0.002)
    wall = time.monotonic() - start
    with open(out, "w") as f:
        f.write(
            f"{wall:.3f} {usage.ru_maxrss} {usage.ru_utime:.3f} {usage.ru_stime:.3f} {peak_anon}\n"
        )
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
