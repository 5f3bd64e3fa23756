# A minimal harness in the style of reference-kernels' eval.py, written here
# for kernelbox's compatibility test: it speaks the same contract (argv mode
# and cases file, POPCORN_FD key: value lines, exit codes) but is not ours.
import os
import re
import sys
import time

import torch


def main():
    fd = int(os.environ["POPCORN_FD"])
    out = os.fdopen(fd, "w")
    log = lambda k, v: print(f"{k}: {v}", file=out, flush=True)
    mode, path = sys.argv[1], sys.argv[2]
    cases = []
    for line in open(path):
        if line.strip():
            cases.append({k.strip(): int(v) for k, v in (p.split(":") for p in line.split(";"))})
    from reference import check_implementation, generate_input
    from submission import custom_kernel

    if mode == "test":
        log("test-count", len(cases))
        ok = True
        for i, c in enumerate(cases):
            data = generate_input(**c)
            good, msg = check_implementation(data, custom_kernel(data))
            log(f"test.{i}.spec", "; ".join(f"{k}: {v}" for k, v in c.items()))
            log(f"test.{i}.status", "pass" if good else "fail")
            if not good:
                log(f"test.{i}.message", msg)
                ok = False
        log("check", "pass" if ok else "fail")
        return 0 if ok else 112
    log("benchmark-count", len(cases))
    for i, c in enumerate(cases):
        data = generate_input(**c)
        times = []
        for _ in range(5):
            t0 = time.perf_counter_ns()
            custom_kernel(data)
            times.append(time.perf_counter_ns() - t0)
        mean = sum(times) / len(times)
        log(f"benchmark.{i}.spec", "; ".join(f"{k}: {v}" for k, v in c.items()))
        for key, val in (("runs", 5), ("mean", mean), ("std", 0), ("err", 0), ("best", min(times)), ("worst", max(times))):
            log(f"benchmark.{i}.{key}", val)
    log("check", "pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
