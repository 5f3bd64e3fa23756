# A harness of the grouped-GEMM kind, written for kernelbox's compatibility
# test: its cases hold lists ("sizes: [3, 5]"), one tensor a group. It
# speaks KernelBot's contract (argv mode and cases file, POPCORN_FD
# key: value lines, exit 112 on a failed test).
import ast
import os
import sys
import time


def parse(line):
    case = {}
    for part in line.split(";"):
        k, v = part.split(":", 1)
        case[k.strip()] = ast.literal_eval(v.strip())
    return case


def main():
    out = os.fdopen(int(os.environ["POPCORN_FD"]), "w")
    log = lambda k, v: print(f"{k}: {v}", file=out, flush=True)
    mode, path = sys.argv[1], sys.argv[2]
    cases = [parse(line) for line in open(path) if line.strip()]
    from reference import check_implementation, generate_input
    from submission import custom_kernel

    prefix = "test" if mode == "test" else "benchmark"
    log(f"{prefix}-count", len(cases))
    ok = True
    for i, c in enumerate(cases):
        log(f"{prefix}.{i}.spec", "; ".join(f"{k}: {v}" for k, v in c.items()))
        data = generate_input(**c)
        t0 = time.perf_counter_ns()
        got = custom_kernel(data)
        took = time.perf_counter_ns() - t0
        good, msg = check_implementation(data, got)
        if mode == "test":
            log(f"test.{i}.status", "pass" if good else "fail")
            if not good:
                log(f"test.{i}.error", msg)
        elif not good:
            log(f"benchmark.{i}.status", "fail")
            log(f"benchmark.{i}.error", msg)
        else:
            for key, val in (("runs", 1), ("mean", took), ("std", 0), ("err", 0), ("best", took), ("worst", took)):
                log(f"benchmark.{i}.{key}", val)
        ok = ok and good
    log("check", "pass" if ok else "fail")
    return 0 if ok else 112


if __name__ == "__main__":
    sys.exit(main())
