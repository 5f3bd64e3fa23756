"""kernelbox evaluation harness.

    python eval.py MODE CASES_FILE [MODE CASES_FILE ...]

MODE is test, benchmark, leaderboard (the ranked benchmark: fresh inputs for
every timed call, each output checked) or profile. Results go to the file
descriptor named by POPCORN_FD as "key: value" lines; POPCORN_SEED, when set,
is a secret seed mixed into every case seed. POPCORN_GPUS, set for a
multi-GPU problem, is how many GPUs the run has: every case then runs as
world_size ranks, one process each, joined by torch.distributed. Exit codes: 0 ok, 110 CUDA
error, 111 no result pipe, 112 wrong result, 113 bad case, 114 timeout,
and ours: 115 the harness could not start (not the submission's fault).

The submission never runs in this process: a worker interpreter imports it, and
that worker has neither the result descriptor nor the secret seed. A one-device
run is judged by judge.py (inputs, expected outputs, times and verdicts all
stay here), profile mode too; multi-GPU runs on CUDA still use gang.py, whose
answers a second check in this process verifies.
"""

import sys

# First of all: the run directory, where Python puts this script's folder
# at the head of sys.path, is the submission's to write (an archive's
# files land there before this process starts). Searched first, a json.py
# of its own would be imported here in place of the standard library's,
# with the secret seed and the result descriptor in reach. It goes last:
# the interpreter's own modules and site-packages come first, and only
# the harness's and the problem's modules are found there.
sys.path.append(sys.path.pop(0))

import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402

import gang  # noqa: E402
import judge  # noqa: E402
import ranklink  # noqa: E402
import wire  # noqa: E402
from judge import Judge, WorkerDied, maybe_cuda, plain_output, stats  # noqa: E402,F401 (plain_output: the harness's tests import it from here)

EXIT_OK, EXIT_CUDA, EXIT_PIPE, EXIT_VALIDATION, EXIT_BAD_CASE, EXIT_TIMEOUT = 0, 110, 111, 112, 113, 114
# Ours, beyond KernelBot's codes: the harness itself could not start (torch
# or the problem's reference.py failed to import), which is no fault of the
# submission.
EXIT_HARNESS = 115

def escape(value) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n")


class Popcorn:
    """The result stream: one line per key, flushed at once so that a run
    killed half-way still reports what it finished."""

    def __init__(self, fd: int):
        self.file = os.fdopen(fd, "w", buffering=1, closefd=True)
        self.flags = 0

    def log(self, key, value):
        self.file.write(f"{key}: {escape(value)}\n")
        self.file.flush()

    def flag(self, rule, message):
        """One suspicion about the run's timings, for the organisers."""
        self.log(f"flag.{self.flags}", f"{rule} {message}")
        self.flags += 1


def open_popcorn():
    raw = os.environ.pop("POPCORN_FD", None)
    try:
        fd = int(raw)
        os.set_inheritable(fd, False)
        return Popcorn(fd)
    except (TypeError, ValueError, OSError) as e:
        print(f"kernelbox harness: POPCORN_FD={raw!r} is not an open descriptor: {e}", file=sys.stderr)
        sys.exit(EXIT_PIPE)


def combine(public: int, secret: int) -> int:
    """Mix the secret into a public seed (a Cantor pairing), so the seed a
    private run uses says nothing about the public one."""
    return (public + (public + secret) * (public + secret + 1) // 2) % (2**63)


_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")


def parse_value(v: str):
    if v.startswith("[") and v.endswith("]"):
        # A list value (KernelBot's grouped GEMM: "m: [96, 128]"), which
        # KernelBot's harness hands generate_input as a tuple.
        inner = v[1:-1].strip()
        return tuple(parse_value(x.strip()) for x in inner.split(",")) if inner else ()
    if _INT.match(v):
        return int(v)
    if v in ("true", "True"):
        return True
    if v in ("false", "False"):
        return False
    if _FLOAT.match(v):
        return float(v)
    return v


def read_cases(path):
    cases = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            case = {}
            for part in line.split(";"):
                key, sep, value = part.partition(":")
                key, value = key.strip(), value.strip()
                if not sep or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key) or not value:
                    raise ValueError(f"{path}:{lineno}: {part.strip()!r} is not 'key: value'")
                case[key] = parse_value(value)
            cases.append(case)
    return cases


def spec_of(case) -> str:
    """A case as the cases file wrote it (a list value as "[96, 128]")."""
    return "; ".join(f"{k}: {list(v) if isinstance(v, tuple) else v}" for k, v in case.items())


def is_cuda_error(text: str) -> bool:
    return "CUDA error" in text or "HIP error" in text or "cudaError" in text or "illegal memory access" in text


class JudgeRanks:
    """A multi-GPU run's cases on the judge (ranklink.py): each gets a
    judge over world_size ranks, started when a case first needs it."""

    def __init__(self, gpus):
        self.gpus, self.judge, self.flags, self.ran = gpus, None, [], False
        self.go_at = None

    def ask(self, kind, case):
        world = ranklink.world_of(case, self.gpus)
        if isinstance(world, str):
            return {"error": world, "bad_case": True}
        if self.judge is None or self.judge.world != world:
            fresh = self.judge is None and not self.ran
            self.close()
            self.judge = Judge(world=world, fresh=fresh)
        self.ran = True
        return self.judge.ask(kind, case)

    def close(self):
        if self.judge is not None:
            self.judge.close()
            self.flags += self.judge.flags
            self.judge = None


def run_tests(out: Popcorn, pool, cases) -> int:
    out.log("test-count", len(cases))
    passed = True
    code = EXIT_OK
    for i, case in enumerate(cases):
        out.log(f"test.{i}.spec", spec_of(case))
        t0 = time.perf_counter_ns()
        try:
            reply = pool.ask("test", case)
            out.log(f"test.{i}.wall", time.perf_counter_ns() - t0)
        except WorkerDied as e:
            out.log(f"test.{i}.status", "fail")
            out.log(f"test.{i}.error", str(e))
            out.log("check", "fail")
            return EXIT_HARNESS if e.setup else EXIT_VALIDATION
        if "error" in reply:
            passed = False
            out.log(f"test.{i}.status", "fail")
            out.log(f"test.{i}.error", reply["error"])
            if reply.get("bad_case"):
                code = EXIT_BAD_CASE
            elif is_cuda_error(reply["error"]):
                code = EXIT_CUDA
        elif reply["ok"]:
            out.log(f"test.{i}.status", "pass")
            if reply["message"]:
                out.log(f"test.{i}.message", reply["message"])
        else:
            passed = False
            out.log(f"test.{i}.status", "fail")
            out.log(f"test.{i}.message", reply["message"])
    out.log("check", "pass" if passed else "fail")
    if passed:
        return EXIT_OK
    return code if code != EXIT_OK else EXIT_VALIDATION


def run_benchmarks(out: Popcorn, pool, cases, kind: str) -> int:
    out.log("benchmark-count", len(cases))
    judged = isinstance(pool, (Judge, JudgeRanks))
    for i, case in enumerate(cases):
        out.log(f"benchmark.{i}.spec", spec_of(case))
        try:
            reply = pool.ask(kind, case)
        except WorkerDied as e:
            if e.setup:
                out.log(f"benchmark.{i}.status", "fail")
                out.log(f"benchmark.{i}.error", str(e))
                out.log("check", "fail")
                return EXIT_HARNESS
            reply = {"error": str(e)}
        if "error" in reply:
            out.log(f"benchmark.{i}.status", "fail")
            out.log(f"benchmark.{i}.error", reply["error"])
            out.log("check", "fail")
            if reply.get("bad_case"):
                return EXIT_BAD_CASE
            return EXIT_CUDA if is_cuda_error(reply["error"]) else EXIT_VALIDATION
        if kind == "profile":
            import base64

            out.log(f"benchmark.{i}.report", base64.b64encode(reply["report"].encode()).decode())
            continue
        times = reply.get("times")
        # The judge's net times may fall at or below zero (it flags them);
        # their mean may not, which it refuses as unstable timing. The older
        # path's times are the worker's own, and never below zero.
        if not (isinstance(times, list) and times and all(isinstance(t, (int, float)) and math.isfinite(t) and (judged or t >= 0)
                                                          for t in times) and sum(times) > 0):
            out.log(f"benchmark.{i}.status", "fail")
            out.log(f"benchmark.{i}.error", "the submission's process sent no valid times")
            out.log("check", "fail")
            return EXIT_VALIDATION
        s = stats(times)
        for key in ("runs", "mean", "std", "err", "best", "worst"):
            out.log(f"benchmark.{i}.{key}", s[key] if key == "runs" else f"{s[key]:.3f}")
        # The judge's CUDA clock: timed calls (windows) whose reply came
        # after the head start had run out, their time counting (late), of
        # all (calls), the head start reached, and
        # (KERNELBOX_JUDGE_SELFTIME) the worker's own event times, to
        # measure the judge's error; calls to a window (batch), the median
        # of calls alone, and why windows were not believed.
        for key, name in (("late", "late"), ("calls", "calls"), ("head_start_ns", "head_start"), ("worker_mean", "worker_mean"),
                          ("segments", "segments"), ("batch", "batch"), ("alone_median", "alone_median")):
            v = reply.get(key)
            if isinstance(v, (int, float)) and math.isfinite(v):
                out.log(f"benchmark.{i}.{name}", f"{v:.0f}" if key != "worker_mean" else f"{v:.3f}")
        if isinstance(reply.get("batch_refused"), str):
            out.log(f"benchmark.{i}.batch_refused", reply["batch_refused"][:300])
        if isinstance(reply.get("offset"), str):
            out.log(f"benchmark.{i}.clock_offset", reply["offset"][:300])
        if isinstance(reply.get("l2_reset"), str):
            out.log(f"benchmark.{i}.l2_reset", reply["l2_reset"][:200])
    out.log("check", "pass")
    return EXIT_OK


class Gate:
    """The sandbox's gate (KERNELBOX_GO_FD): one byte arrives when the
    device is this run's. Until then the harness may import and start its
    workers, and must not touch a device. Without the variable there is
    nothing to wait for. The variable is gone before any worker starts,
    and no worker inherits the descriptor (they start with close_fds)."""

    def __init__(self, standby=False):
        raw = os.environ.pop("KERNELBOX_GO_FD", None)
        self.fd = int(raw) if raw and raw.isdigit() else None
        self.began = self.waited = 0
        # A standby's run (its arguments) follows the byte, as JSON.
        self.standby, self.message = standby, {}

    def wait(self):
        if self.fd is None:
            return
        self.began = time.perf_counter_ns()
        try:
            opened = os.read(self.fd, 1)
            rest = []
            while opened and self.standby:
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    break
                rest.append(chunk)
        finally:
            os.close(self.fd)
            self.fd = None
        self.waited = time.perf_counter_ns() - self.began
        if not opened:
            # The runner gave the run up before it began.
            raise SystemExit(EXIT_HARNESS)
        if self.standby:
            self.message = json.loads(b"".join(rest) or b"{}")


MODES = ("test", "benchmark", "leaderboard", "profile")
# eval.py --standby: the run's arguments come at the gate.
STANDBY = "--standby"


def read_phases(argv, secret):
    """[(mode, cases)] from MODE CASES_FILE [MODE CASES_FILE ...], or a
    string saying what is wrong with them."""
    args = argv[1:]
    if not args or len(args) % 2 or any(m not in MODES for m in args[::2]):
        return "usage: eval.py test|benchmark|leaderboard|profile CASES_FILE [MODE CASES_FILE ...]"
    modes = args[::2]
    if "profile" in modes and len(modes) > 1:
        # ncu wraps the whole run, and a multi-GPU profile run hands
        # nothing over for the second check.
        return "profile runs alone: ncu wraps its whole run"
    if secret is not None:
        try:
            secret = int(secret)
        except ValueError:
            return "POPCORN_SEED is not an integer"
    phases = []
    for mode, path in zip(modes, args[1::2]):
        try:
            cases = read_cases(path)
        except (OSError, ValueError) as e:
            return f"cannot read cases: {e}"
        if secret is not None:
            for case in cases:
                if "seed" in case:
                    case["seed"] = combine(case["seed"], secret)
        phases.append((mode, cases))
    return phases


def main(argv) -> int:
    """Runs each phase in turn with one worker (or gang) for all of them, so
    torch, the device context and the submission's compile caches start
    once per run. With more than one phase, a "phase: MODE" line opens each
    phase's results, and the first phase that fails ends the run with its
    exit code."""
    judge.undumpable()
    wire.sample_stacks("judge")
    out = open_popcorn()
    secret = os.environ.pop("POPCORN_SEED", None)
    t0 = time.perf_counter_ns()
    standby = argv[1:] == [STANDBY]
    if standby:
        # Started before its run was known (problems/standby.go): the
        # judge prepares, and the run's arguments come with the go.
        if "KERNELBOX_GO_FD" not in os.environ:
            print("kernelbox harness: --standby needs KERNELBOX_GO_FD", file=sys.stderr)
            return EXIT_BAD_CASE
        gate = Gate(standby=True)
        pool = Judge(gate.wait, preload=True, standby=True)
        argv = argv[:1] + [str(a) for a in gate.message.get("argv", [])]
    phases = read_phases(argv, secret)
    if isinstance(phases, str):
        print(f"kernelbox harness: {phases}", file=sys.stderr)
        return EXIT_BAD_CASE
    gpus = os.environ.pop("POPCORN_GPUS", None)
    profile = phases[0][0] == "profile"  # it runs alone (read_phases)
    if standby and (gpus is not None or profile):
        # A profile run's sandbox is not a standby's: more memory, and the
        # profiling device nodes (problems.Adopt refuses it too).
        print("kernelbox harness: a standby serves one-device runs that are not profiled", file=sys.stderr)
        return EXIT_BAD_CASE
    if gpus is None:
        if not standby:
            gate = Gate()
            pool = Judge(gate.wait, preload=gate.fd is not None, timed=not profile)
        # Where a run's start-up time goes: before the gate (imports, the
        # workers' start: overlapped with the previous run on a warm start),
        # waiting at it, and from the gate to a judge ready to time.
        if pool.go_at is not None:
            out.log("judge-prepare", gate.began - t0 if gate.began else pool.go_at - t0)
            out.log("judge-gate", gate.waited)
            out.log("judge-start", time.perf_counter_ns() - pool.go_at)
            # From the go: the judge's own device, the worker's hello (its
            # device), the link (the null worker, IPC) ready.
            for k, v in getattr(pool, "marks", {}).items():
                out.log(f"judge-{k}", v)
    else:
        # Only the judge prepares before the gate; the ranks go at once.
        Gate().wait()
        try:
            # Multi-GPU profile mode hands nothing over for the second check;
            # on the CPU backend the ranks are the judge's (ranklink.py).
            pool = gang.Ranks(int(gpus), check=not profile) if maybe_cuda() or profile else JudgeRanks(int(gpus))
        except ValueError:
            print(f"kernelbox harness: POPCORN_GPUS={gpus!r} is not an integer", file=sys.stderr)
            return EXIT_BAD_CASE
    try:
        for mode, cases in phases:
            if len(phases) > 1:
                out.log("phase", mode)
            t0 = time.perf_counter_ns()
            code = run_tests(out, pool, cases) if mode == "test" else run_benchmarks(out, pool, cases, mode)
            if len(phases) > 1:
                out.log("phase-wall", time.perf_counter_ns() - t0)
            if code != EXIT_OK:
                return code
        return EXIT_OK
    finally:
        t0 = time.perf_counter_ns()
        try:
            pool.close()
        finally:
            # Written even when closing broke: the run's flags are its own.
            for rule, message in getattr(pool, "flags", ()):
                out.flag(rule, message)
        offsets = getattr(pool, "offsets", None)
        if offsets:
            out.log("judge-offset", f"{offsets[0]:.0f} ns before the submission, {offsets[1]:.0f} ns after its worker")
        if isinstance(pool, Judge) and pool.go_at is not None:
            out.log("judge-close", time.perf_counter_ns() - t0)
            global JUDGED
            JUDGED = True


def leave(code: int):
    """Exit with code. After a judged run everything is written and
    flushed and the workers are gone: tearing down what torch set up (the
    device context, its allocator, the worker memory opened here) would
    only delay the result, so the process leaves at once (profile mode
    too: ncu collects each profiled kernel as it runs, in the worker, and
    writes its report once every process of the run has gone). A
    multi-GPU run exits the usual way."""
    if not JUDGED:
        sys.exit(code)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# Set once a run has been judged to its end (main's finally).
JUDGED = False

if __name__ == "__main__":
    leave(main(sys.argv))
