"""A minimal harness speaking the POPCORN protocol, for the daemon's tests.

A submission may define SLEEP (seconds) to make its run take that long, and
SCALE to make its timed result proportionally slower, so tests control
ordering, ranking and kill timing without a real kernel.
"""
import os
import sys
import time

mode, cases_file = sys.argv[1], sys.argv[2]
out = os.fdopen(int(os.environ.pop("POPCORN_FD")), "w", buffering=1)
secret = int(os.environ.pop("POPCORN_SEED", "0") or "0")
cases = []
for line in open(cases_file):
    line = line.strip()
    if line:
        cases.append(dict(kv.split(": ", 1) for kv in line.split("; ")))
sys.path.insert(0, os.getcwd())
import submission  # noqa: E402

if getattr(submission, "HARNESS_FAULT", False):
    # The harness's own failure (exit 115), as the judge reports one.
    out.write("check: fail\nerror: the judge failed (not the submission)\n")
    sys.exit(115)

time.sleep(float(getattr(submission, "SLEEP", 0)))
ok = True
kind = "test" if mode == "test" else "benchmark"
out.write(f"{kind}-count: {len(cases)}\n")
for i, case in enumerate(cases):
    n = int(case["n"]) + secret % 5
    xs = list(range(n))
    start = time.perf_counter_ns()
    got = submission.custom_kernel(xs)
    ns = (time.perf_counter_ns() - start) * float(getattr(submission, "SCALE", 1)) + 1000 * n
    passed = got == [2 * x for x in xs]
    # The secret run's failures come from the secret seed.
    if secret and getattr(submission, "FAIL_SECRET", False):
        passed = False
    out.write(f"{kind}.{i}.spec: n: {case['n']}; seed: {case['seed']}\n")
    if mode == "profile" and passed:
        import base64
        what = "under ncu" if os.environ.get("POPCORN_NCU") == "1" else "without ncu"
        out.write(f"benchmark.{i}.report: {base64.b64encode(what.encode()).decode()}\n")
    elif kind == "test":
        out.write(f"test.{i}.status: {'pass' if passed else 'fail'}\n")
        if not passed:
            out.write(f"test.{i}.error: wrong result for n={n}\n")
    elif passed:
        out.write(f"benchmark.{i}.runs: 1\nbenchmark.{i}.mean: {ns:.3f}\nbenchmark.{i}.std: 0\n")
        out.write(f"benchmark.{i}.err: 0\nbenchmark.{i}.best: {ns:.3f}\nbenchmark.{i}.worst: {ns:.3f}\n")
    else:
        out.write(f"benchmark.{i}.status: fail\nbenchmark.{i}.error: wrong result for n={n}\n")
    ok = ok and passed
out.write(f"check: {'pass' if ok else 'fail'}\n")
sys.exit(0 if ok else 112)
