# A harness in the style of reference-kernels' pmpp_v2 eval.py, written here
# for kernelbox's tests: each test runs in a `spawn` multiprocessing
# Pool(1), so that user code runs in a child, as KernelBot's does. Like
# theirs, it waits for ever when the kernel kills that child: Pool starts
# a new worker and the task's result never comes.
import multiprocessing
import os
import sys


def run_single_test(case):
    from reference import check_implementation, generate_input
    from submission import custom_kernel

    data = generate_input(**case)
    return check_implementation(data, custom_kernel(data.clone()))


def main():
    try:
        out = os.fdopen(int(os.environ["POPCORN_FD"]), "w")
    except (KeyError, ValueError, OSError):
        return 111
    log = lambda k, v: print(f"{k}: {v}", file=out, flush=True)  # noqa: E731
    mode, path = sys.argv[1], sys.argv[2]
    cases = []
    for line in open(path):
        if line.strip():
            cases.append({k.strip(): int(v) for k, v in (p.split(":") for p in line.split(";"))})
    if mode != "test":
        return 113
    log("test-count", len(cases))
    ok = True
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        for i, case in enumerate(cases):
            log(f"test.{i}.spec", "; ".join(f"{k}: {v}" for k, v in case.items()))
            good, msg = pool.apply(run_single_test, (case,))
            log(f"test.{i}.status", "pass" if good else "fail")
            if not good:
                log(f"test.{i}.error", msg)
                ok = False
    log("check", "pass" if ok else "fail")
    return 0 if ok else 112


if __name__ == "__main__":
    sys.exit(main())
