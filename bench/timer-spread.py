"""Where the run-to-run spread of a timed kernel comes from (GPU machine).

Times one single-kernel add (vectoradd's shapes, fp16) in 10 fresh
processes, three ways per iteration, interleaved: "synced" (the end event
recorded after a device-wide synchronize, so work on a side stream counts:
the harness before its _Timer), "events" (the end event recorded on the
stream right after the call, as Triton's do_bench does) and "harness" (the
harness's own _Timer from problems/library/harness/eval.py: a head start,
the stream's event, and the device-wide end only when work outlasts the
stream, each case's round trip calibrated and a long tail timed again).
Prints the round trip against the host's wait, each way's mean per
process and the coefficient of variation across processes.

    python3 bench/timer-spread.py            # the parent: starts the children
"""
import json
import os
import statistics
import subprocess
import sys
import time

# The harness's eval.py: beside this script (a sandbox's copied workdir) or
# in the repository.
HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS = HERE if os.path.exists(os.path.join(HERE, "eval.py")) else os.path.join(HERE, "..", "problems", "library", "harness")

SHAPES = [(4096, 4096), (8192, 8192), (4096, 16384)]


def child():
    import torch

    sys.path.insert(0, HARNESS)
    from eval import _Timer

    flush = torch.empty(256 << 20 >> 2, dtype=torch.int32, device="cuda")
    timer = _Timer(torch, time.perf_counter_ns)
    clone = lambda d: tuple(x.clone() for x in d)  # noqa: E731
    add = lambda d: d[0] + d[1]  # noqa: E731
    # The host's round trip against how long it waited for the device.
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    trips = {}
    for wait_us in (0, 30, 100, 300, 1000):
        timer.calibrate(wait_us * 1000, (a, a), clone, flush.zero_)
        trips[wait_us] = (timer.tail_ns, timer.tail_limit_ns)
    out = {"round_trip_ns": trips}
    tails = retries = 0
    for rows, cols in SHAPES:
        a = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
        b = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
        for _ in range(20):
            a + b
        torch.cuda.synchronize()
        t = {"synced": [], "events": [], "harness": []}
        sizing = min(timer.once(add, (a, b), clone, flush.zero_)[2] for _ in range(3))
        timer.calibrate(sizing, (a, b), clone, flush.zero_)
        timer.retries = 0
        for _ in range(100):
            _, r, ns, tail = timer.time(add, (a, b), clone, flush.zero_)
            t["harness"].append(ns / 1e3)
            tails += tail
            del r
            for way in ("synced", "events"):
                torch.cuda.synchronize()
                flush.zero_()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                r = a + b
                if way == "synced":
                    torch.cuda.synchronize()
                    e.record()
                else:
                    e.record()
                    torch.cuda.synchronize()
                e.synchronize()
                t[way].append(s.elapsed_time(e) * 1e3)
                del r
        out[f"{rows}x{cols}"] = {w: (statistics.mean(v), statistics.stdev(v)) for w, v in t.items()}
        retries += timer.retries
    out["tails"], out["retries"] = tails, retries
    print(json.dumps(out))


def main():
    runs = []
    for _ in range(10):
        p = subprocess.run([sys.executable, __file__, "--child"], capture_output=True, text=True, check=True)
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    for wait in runs[0]["round_trip_ns"]:
        print(f"round trip after a {wait:>4s} us wait, median (limit) per process, us:",
              " ".join(f"{r['round_trip_ns'][wait][0] / 1e3:.1f} ({r['round_trip_ns'][wait][1] / 1e3:.1f})" for r in runs))
    print("calls whose tail was counted:", [r["tails"] for r in runs], "retried:", [r["retries"] for r in runs])
    for shape in SHAPES:
        shape = f"{shape[0]}x{shape[1]}"
        for way in ("synced", "events", "harness"):
            means = [r[shape][way][0] for r in runs]
            within = statistics.mean(r[shape][way][1] / r[shape][way][0] * 100 for r in runs)
            m = statistics.mean(means)
            print(f"{shape:12s} {way:7s} mean {m:8.2f} us  CV across processes {statistics.stdev(means) / m * 100:5.2f} %"
                  f"  (within a process {within:5.2f} %)  min {min(means):.2f} max {max(means):.2f}")


if __name__ == "__main__":
    child() if "--child" in sys.argv else main()
