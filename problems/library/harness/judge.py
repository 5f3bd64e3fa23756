"""The judge: the trusted half of a run, which decides every verdict and
every time without ever importing the submission.

It starts the workers (worker.py, the only processes that import the
submission), generates each input, keeps the reference's answer to
itself, hands the input over in memory the worker can only read, and
reads the output back from memory the worker cannot change afterwards.

Audit map: where each thing a fair score rests on is computed. All of it
runs in this process (eval.py's, non-dumpable); none of it in a worker.

    seeds            Judge.draw (SystemRandom per ranked call); the secret
                     is mixed in by eval.read_phases
    inputs           Judge.draw -> reference.generate_input; multi-GPU:
                     ranklink.rank_inputs
    expected output  expected_of; multi-GPU: ranklink.ranks_expected
    hand-over        CPU: cpulink.CpuLink.timed (sealed memfd, sent with
                     the call inside the window); CUDA: cudalink.CudaLink
                     (the judge's buffer, written after the head start,
                     compared with its copy after every call); ranks:
                     ranklink.RankLink.timed
    the clock        CPU: CpuLink.timed / RankLink.timed (perf_counter_ns);
                     CUDA: CudaLink.once (events Ta, Tb on our stream)
    null offset      CudaLink.start_null (before the submission is
                     imported), CudaLink.recheck via Judge.recheck_clock
                     (after the worker is gone)
    comparison       Judge.judge -> plain_output, verdict (the problem's
                     check, with this process's torch and reference)
    windows, fusing  Judge.batch_size, Judge.batched, Judge.fused
    flags, refusals  Judge.check_timing, Judge.recheck_clock
    knobs            read_knobs, once, at import (KNOBS)
    this process     undumpable (eval.main calls it first)
    the score        not here: the Go runner, from the means eval.py
                     writes (problems.Score, the physics floor)

What a worker says is believed only as a failure: its replies name where
its output lies, never what it is or how long it took.
"""
import importlib
import math
import os
import random
import sys
import time
import traceback

import ranklink
import wire
from cpulink import CpuLink
from peer import Peer, maybe_cuda  # noqa: F401 - eval imports maybe_cuda from here
from cudalink import CudaLink
from wire import WorkerDied  # noqa: F401 - eval imports it from here

# Timing knobs: (max repeats, kernel-time budget s, wall cap s) per device and
# kind. KERNELBOX_BENCH_* override them (unstable; for problem authors).
LIMITS = {
    ("cuda", "benchmark"): (100, 10.0, 120.0),
    ("cuda", "leaderboard"): (100, 30.0, 120.0),
    # The CPU backend exists to exercise the pipeline, not to rank: keep it quick.
    ("cpu", "benchmark"): (100, 1.0, 5.0),
    ("cpu", "leaderboard"): (50, 1.0, 8.0),
}
MIN_RUNS = 3
# CUDA: a case whose calls are short is timed several calls to a window,
# so that the clock's fixed cost and its error (+-5 us from run to run on
# the H200) are shared by the window's calls. SINGLE_CALLS alone first (to
# size the windows and to compare against); then windows of calls whose
# kernel time reaches BATCH_WINDOW_NS, at most MAX_BATCH calls and
# BATCH_BYTES of inputs, MIN_WINDOWS to MAX_WINDOWS windows.
SINGLE_CALLS = 10
MIN_WINDOWS = 10
BATCH_WINDOW_NS = 1_000_000
MAX_BATCH = 32
BATCH_BYTES = 1 << 30
MAX_WINDOWS = 30
# A window's calls may run faster than calls alone by this share and this
# many ns (what overlapping one call's tail with the next one's start
# honestly gives); faster, and the calls alone count (Judge.fused).
FUSE_SHARE = 0.75
FUSE_NS = 6_000
TARGET_REL_ERR = 0.001
# Untimed calls after the first checked one: JIT compilation and caches.
WARM_S = 0.05
# The null offset measured again after the worker is gone may differ from
# the one taken off every time by DRIFT_SHARE of it and DRIFT_NS before the
# run is flagged: beyond that, every net time of the run is off by as much.
DRIFT_SHARE = 0.1
DRIFT_NS = 20_000


def read_knobs(env):
    """The run's knobs, read once when the judge is imported, before any
    worker exists: a run keeps one setting throughout. Unstable; for
    problem authors and for measuring the judge."""
    def num(name, kind):
        v = env.get(name)
        return kind(v) if v not in (None, "") else None

    return {"repeats": num("KERNELBOX_BENCH_MAX_REPEATS", int), "budget": num("KERNELBOX_BENCH_BUDGET_S", float),
            "wall": num("KERNELBOX_BENCH_WALL_S", float), "batch": num("KERNELBOX_BENCH_BATCH", int),
            "selftime": env.get("KERNELBOX_JUDGE_SELFTIME") == "1", "ncu": env.get("POPCORN_NCU") == "1"}


KNOBS = read_knobs(os.environ)


def limits_for(dev: str, kind: str):
    repeats, budget, wall = LIMITS[(dev, kind)]
    k = KNOBS
    return (k["repeats"] if k["repeats"] is not None else repeats, k["budget"] if k["budget"] is not None else budget,
            k["wall"] if k["wall"] is not None else wall)


def stats(times):
    n = len(times)
    mean = sum(times) / n
    var = sum((t - mean) ** 2 for t in times) / (n - 1) if n > 1 else 0.0
    std = math.sqrt(var)
    return {"runs": n, "mean": mean, "std": std, "err": std / math.sqrt(n), "best": min(times), "worst": max(times)}


def enough(times, budget_s, wall_s, wall0, calls=1, least=MIN_RUNS):
    """Whether a benchmark has timed enough windows (of calls each): a
    small enough standard error, or its kernel-time budget or wall cap
    spent (at least least of them: three times can agree by chance)."""
    if len(times) < least:
        return False
    s = stats(times)
    if s["mean"] > 0 and s["err"] / s["mean"] < TARGET_REL_ERR:
        return True
    return s["mean"] * len(times) * calls > budget_s * 1e9 or time.perf_counter() - wall0 > wall_s


def plain_output(kb, torch, expected, output, where="the output"):
    """Why an output is not what the reference returns, or "": every tensor
    in it plain, with storage, and like the reference's where that is known
    (kbutils.tensor_mismatch), and as many items as the reference's."""
    if isinstance(output, torch.Tensor) or isinstance(expected, torch.Tensor):
        return kb.tensor_mismatch(output, expected if isinstance(expected, torch.Tensor) else None, where)
    if isinstance(output, (tuple, list)):
        if isinstance(expected, (tuple, list)) and len(expected) != len(output):
            return f"{where} has {len(output)} items, the reference's has {len(expected)}"
        for i, o in enumerate(output):
            e = expected[i] if isinstance(expected, (tuple, list)) else None
            msg = plain_output(kb, torch, e, o, f"{where}[{i}]")
            if msg:
                return msg
    return ""


def verdict(kb, torch, ref, data, expected, output):
    """(ok, message) for one output: plain tensors like the reference's,
    then the problem's own check."""
    msg = plain_output(kb, torch, expected, output)
    if msg:
        return False, msg
    chk = ref.check_implementation
    compare = getattr(chk, "compare", None)
    if compare is not None and expected is not None:
        result = compare(expected, output)
    else:
        result = chk(data, output)
    if isinstance(result, tuple):
        ok, msg = bool(result[0]), str(result[1])
    elif isinstance(result, (list, str)):
        msg = "\n".join(result) if isinstance(result, list) else result
        ok = not msg
    else:
        ok, msg = bool(result), ""
    return ok, msg


def expected_of(kb, ref, data):
    """The reference's answer for a verdict, or None for a KernelBot-style
    checker that only takes (data, output)."""
    fn = getattr(ref.check_implementation, "expected", None)
    if fn is None:
        return None
    with kb.deterministic():
        return fn(kb.clone_data(data))


def undumpable():
    """Make this process non-dumpable: the worker runs as the same user, and
    without this it could read our environment (the secret seed is still in
    /proc/PID/environ after the pop), open our result descriptor through
    /proc/PID/fd or write our memory through /proc/PID/mem. Linux only; a
    no-op elsewhere."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_DUMPABLE = 4
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            print(f"kernelbox harness: prctl(PR_SET_DUMPABLE): errno {ctypes.get_errno()}", file=sys.stderr)
    except (OSError, AttributeError):
        pass


class Judge:
    """One worker and everything that judges it; ask(kind, case) answers
    as eval.Pool does. A failed start is raised by the first ask, so that
    it is reported as that case's failure."""

    # A one-device run's, unless __init__ says otherwise.
    world, ranks, rendezvous = None, (), None
    flags, timed_any, offsets, copy_inputs = (), False, None, False

    def __init__(self, go=lambda: None, preload=False, standby=False, timed=True, world=None, fresh=True):
        """go blocks until the device is this run's (a warm start: the
        sandbox's gate); everything before it touches no device and runs
        no user code. With preload the worker also imports Triton before
        the go: time that a warm start hides, and a cold one would add.
        A standby's problem comes with the go: its reference is imported
        after it. Without timed (a profile run) the judge times no call,
        and starts no null worker to calibrate its clock against. With
        world, a multi-GPU problem's world_size ranks, a worker each
        (ranklink.py). Not fresh: a submission of this run has already run
        in this directory (an earlier world's ranks) and may have left
        files a new worker imports, so a worker that cannot start is then
        the submission's doing, not the box's."""
        self.peer = None
        self.world, self.ranks, self.rendezvous, self.fresh = world, [], None, fresh
        self.broken = None
        self.go_at = None  # perf_counter_ns when the gate opened
        # (rule, message) of what the run's timings give away, for the
        # organisers; eval.py writes them as flag.N lines.
        self.flags = []
        self.timed_any = False
        try:
            self.start(go, preload, standby, timed)
        except WorkerDied as e:
            self.broken = e

    def start(self, go, preload, standby, timed=True):
        if self.world is not None:
            self.rendezvous = ranklink.Rendezvous()
            self.ranks = [Peer(rank=r, world=self.world, store=self.rendezvous.store) for r in range(self.world)]
            self.peer = self.ranks[0]
        else:
            self.peer = Peer(preload=preload and maybe_cuda())
        # On CUDA, a worker of our own that runs no submission: the judge
        # measures its clock's fixed cost against it (CudaLink.calibrate).
        null = Peer(null=True) if maybe_cuda() and timed and self.world is None else None
        # The workers keep the run's compile caches (the submitter's, which
        # the worker can write); the judge compiles nothing, and the CUDA
        # driver's JIT cache is the one it could be handed code through.
        os.environ["CUDA_CACHE_DISABLE"] = "1"
        try:
            import torch

            import kbutils

            # PyTorch 2 imports inductor, dynamo, sympy and Triton the first
            # time deterministic algorithms are switched on: 3.8 s of the
            # first test on the H200's host. Paid here, before the gate, it
            # overlaps the previous run or a standby's wait.
            with kbutils.deterministic():
                pass
            if not standby:
                import reference
        except BaseException as e:  # noqa: BLE001 - torch or the reference broke
            raise self.setup_failed(e, null) from e
        go()
        self.go_at = time.perf_counter_ns()
        if standby:
            try:
                importlib.invalidate_caches()  # the run's files came with the go
                import reference
            except BaseException as e:  # noqa: BLE001 - the reference broke
                raise self.setup_failed(e, null) from e
        self.torch, self.kb, self.ref = torch, kbutils, reference
        # A KernelBot problem's submission may write into its input (an
        # output buffer among them), as KernelBot's harness allows: on the
        # CPU its worker maps it copy-on-write (worker.Worker.inputs), on
        # CUDA it writes the judge's buffer, which the judge writes anew
        # before every call (CudaLink.timed).
        copy = self.copy_inputs = getattr(reference.check_implementation, "expected", None) is None
        for p in (self.ranks or [self.peer]) + [null]:
            if p is not None:
                p.send({"op": "go", "copy_inputs": copy and p is self.peer})
        # The run's directory is the worker's too, and it can write there:
        # a module it drops there must not be what a lazy import here finds.
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        self.dev = kbutils.device()
        self.rng = random.SystemRandom()
        if self.dev == "cuda":
            # The judge's own context while the workers make theirs: a
            # context costs ~0.5 s, and these need not wait for each other.
            torch.empty(1, device="cuda")
        self.marks = {"cuda": time.perf_counter_ns() - self.go_at}
        for p in self.ranks or [self.peer]:
            hello = p.recv()
            if "fatal" in hello:
                raise WorkerDied(str(hello["fatal"]), setup=self.fresh)
            if hello.get("device") != self.dev:
                raise WorkerDied(f"the worker sees device {hello.get('device')!r}, the judge {self.dev!r}", setup=self.fresh)
        self.marks["hello"] = time.perf_counter_ns() - self.go_at
        if self.world is not None:
            if self.dev != "cpu":
                raise WorkerDied("the judge times a multi-GPU problem's ranks on the CPU backend only", setup=True)
            self.link = ranklink.RankLink(self, self.ranks)
        elif self.dev == "cuda":
            try:
                self.link = CudaLink(self, hello, null)
            except WorkerDied:
                raise
            except Exception as e:  # noqa: BLE001 - the driver, torch: the box's
                if null is not None:
                    null.close()
                raise JudgeFailed(e) from e
        else:
            if null is not None:
                null.close()
            self.link = CpuLink(self)
        self.marks["link"] = time.perf_counter_ns() - self.go_at

    def setup_failed(self, e, null):
        """The workers stopped, and the failure of the harness's own set-up
        (torch or the problem's reference) to raise: the box's, exit 115."""
        self.close()
        if null is not None:
            null.close()
        return WorkerDied(f"the harness's own set-up failed: {type(e).__name__}: {e}", setup=True)

    # ------------------------------------------------------------ channel

    def recv(self, want_fds=False):
        msg = self.peer.recv(want_fds)
        self.fds = self.peer.fds
        return msg

    def send(self, obj, fds=()):
        self.peer.send(obj, fds)

    @property
    def dead(self):
        return next((p.dead for p in self.ranks or [self.peer] if p is not None and p.dead), "")

    # ------------------------------------------------------------- inputs

    def draw(self, case, fresh=False):
        """(input, expected output) of a case; with fresh, from a seed drawn
        here that nothing outside this process can know."""
        if fresh and case.get("seed") is not None:
            case = dict(case, seed=self.rng.getrandbits(62))
        if self.world is not None:
            # Every rank's input and expected output, from one seed.
            datas = ranklink.rank_inputs(self.ref, case)
            return datas, ranklink.ranks_expected(self.kb, self.ref, datas)
        data = self.ref.generate_input(**case)
        return data, expected_of(self.kb, self.ref, data)

    def judge(self, data, expected, out):
        if self.world is not None:
            for r, (d, e, o) in enumerate(zip(data, expected, out)):
                msg = self.judge_one(d, e, o)
                if msg:
                    return f"rank {r}: {msg}"
            return ""
        return self.judge_one(data, expected, out)

    def judge_one(self, data, expected, out):
        if expected is None:
            # A KernelBot checker runs ref_kernel on data, which may write
            # into it (an output buffer among the inputs): on a copy, or the
            # next call on data would be handed the answer.
            data = self.kb.clone_data(data)
        try:
            ok, msg = verdict(self.kb, self.torch, self.ref, data, expected, out)
        except Exception as e:  # noqa: BLE001 - the problem's check, on the submission's output
            # The output reached the check (plain tensors, like the
            # reference's where it gives one) and the check could not take
            # it: a KernelBot-style check sees the output unvetted.
            return f"the problem's check raised {type(e).__name__} on this output: {e}"[:2000]
        return "" if ok else (msg or "wrong result")

    # --------------------------------------------------------------- jobs

    def ask(self, kind, case):
        if self.broken is not None:
            raise self.broken
        if self.dead:
            raise WorkerDied(self.dead)
        try:
            data, expected = self.draw(case)
        except TypeError as e:
            return {"error": f"generate_input({wire_case(case)}): {e}", "bad_case": True}
        except Exception as e:  # noqa: BLE001 - the problem's reference broke
            raise JudgeFailed(e) from e
        try:
            wire.flatten(self.torch, data, [])
        except TypeError as e:
            # The problem's input, not the submission: the box's failure.
            raise WorkerDied(f"generate_input({wire_case(case)}): {e}; this problem runs only on its own harness "
                             "(harness: own in its task.yml)", setup=True) from e
        try:
            return self.run(kind, case, data, expected)
        except (WorkerDied, KeyboardInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 - the reference or the judge itself broke
            # Never the contestant's verdict: the run is the box's failure
            # (exit 115), which the runner tries again.
            raise JudgeFailed(e) from e

    def run(self, kind, case, data, expected):
        if kind == "test":
            r = self.link.call(data)
            if "error" in r:
                return {"error": r["error"]}
            msg = r.get("misuse") or self.judge(data, expected, r["out"])
            return {"ok": not msg, "message": msg}
        if kind == "profile":
            return self.profile(data, expected)
        return self.benchmark(kind, case, data, expected)

    def profile(self, data, expected):
        """Profile mode: the worker profiles one call on the case's input
        (worker.Worker.profile) and says what it saw. Nothing ranks on the
        report, so the worker may write it; the call's output is judged
        here as a benchmark's first call is: a wrong kernel fails profile
        mode, and its report is not shown as if it were of a kernel that
        works."""
        r = self.link.profile(data, KNOBS["ncu"])
        if "error" in r:
            return {"error": r["error"]}
        msg = r.get("misuse") or self.judge(data, expected, r["out"])
        if msg:
            return {"error": msg}
        return {"report": r["report"]}

    def benchmark(self, kind, case, data, expected):
        if kind == "leaderboard" and case.get("seed") is None:
            # Its input would repeat call after call: an answer kept from the
            # first call would be a score.
            return {"error": f"a ranked case needs a seed, which the judge replaces for every call ({wire_case(case)})",
                    "bad_case": True}
        repeats, budget_s, wall_s = limits_for(self.dev, kind)
        r = self.link.call(data)
        if "error" in r:
            return {"error": r["error"]}
        msg = r.get("misuse") or self.judge(data, expected, r["out"])
        if msg:
            return {"error": msg}
        reply = self.link.warm(WARM_S)
        if "error" in reply:
            return {"error": str(reply["error"])}
        self.link.prepare()
        limits = (budget_s, wall_s, time.perf_counter())
        times, own = [], []
        first = min(repeats, SINGLE_CALLS) if self.link.batches else repeats
        # The calls that size the windows all run: stopping them early
        # would leave too few to compare the windows against.
        failed, done = self.alone(kind, case, data, expected, first, times, own, limits, first if self.link.batches else MIN_RUNS)
        k = 1 if done or not self.link.batches else self.batch_size(self.link.net(times), data)
        if not failed and not done and k == 1:
            failed, done = self.alone(kind, case, data, expected, repeats - first, times, own, limits, MIN_RUNS)
        if failed:
            return failed
        reply = {}
        if k > 1:
            windows = []
            failed = self.batched(case, k, min(repeats, MAX_WINDOWS), windows, limits)
            if failed:
                return failed
            reply = self.fused(self.link.net(times), self.link.net(windows, k), k)
        reply = {"times": self.link.net(times), **reply, **self.link.report()}
        if own:
            reply["worker_mean"] = sum(own) / len(own)
        self.timed_any = True
        self.check_timing(case, reply)
        return reply

    def check_timing(self, case, reply):
        """Flag what a benchmark's times give away, or raise when they
        cannot be trusted: the box's failure (exit 115), which the runner
        tries again, never a score."""
        where = wire_case(case)
        times = reply["times"]
        if not times:
            raise WorkerDied(f"the judge timed no call of {where} (KERNELBOX_BENCH_MAX_REPEATS?)", setup=True)
        # Late calls (cudalink.py) are neither flagged nor failed: a late
        # call's time holds the wait, so lateness only costs the
        # submission, and an honest custom_kernel that waits for the GPU
        # (.item(), a synchronize) is late every call.
        mean = sum(times) / len(times)
        if mean <= 0:
            raise WorkerDied(f"timing unstable on this GPU: the calls' mean time net of the clock's offset is {mean:.0f} ns, "
                             f"at or below zero ({where}; {reply.get('offset', '')})", setup=True)
        low = sum(1 for t in times if t <= 0)
        if low:
            # Never clamped to 0, which made a faster mean; the organisers
            # see it.
            self.flags.append(("NET_NONPOSITIVE", f"{where}: {low} of {len(times)} net times at or below zero, "
                                                  f"within the clock's error of its offset ({reply.get('offset', '')})"))

    def recheck_clock(self):
        """Once the worker is gone: the null offset again, flagged when it
        drifted from the one every time of the run was netted with."""
        recheck = getattr(self.link, "recheck", None) if self.timed_any else None
        if recheck is None:
            return
        before, _ = self.link.offset()
        after, why = recheck()
        if after is None:
            self.flags.append(("CLOCK_DRIFT", f"the clock's offset could not be measured again after the run: {why}"))
            return
        self.offsets = (before, after)
        if abs(after - before) > max(DRIFT_SHARE * before, DRIFT_NS):
            self.flags.append(("CLOCK_DRIFT", f"the clock's offset was {before:.0f} ns before the submission was imported and "
                                              f"{after:.0f} ns after its worker was gone: every net time is off by about the difference"))

    def alone(self, kind, case, data, expected, n, times, own, limits, least):
        """Up to n calls timed one to a window, into times: (a failure or
        None, whether enough calls are timed)."""
        selftime = KNOBS["selftime"]
        for _ in range(n):
            i = len(times)
            if kind == "leaderboard":
                data, expected = self.draw(case, fresh=True)
            r = self.link.timed([data], selftime)
            if "error" in r:
                return {"error": f"timed iteration {i}: {r['error']}"}, True
            msg = r.get("misuse") or self.judge(data, expected, r["out"])
            if msg:
                return {"error": f"timed iteration {i}: {msg}"}, True
            times.append(r["ns"])
            if r.get("own") is not None:
                own.append(r["own"])
            if enough(self.link.net(times), *limits, least=least):
                return None, True
        return None, False

    def batch_size(self, alone, data):
        """How many calls one window holds: enough that their kernel time
        reaches BATCH_WINDOW_NS, within MAX_BATCH (KERNELBOX_BENCH_BATCH
        lowers it; 1 times every call alone) and BATCH_BYTES of inputs."""
        most = min(MAX_BATCH, KNOBS["batch"] if KNOBS["batch"] is not None else MAX_BATCH)
        mid = sorted(alone)[len(alone) // 2] if alone else 0.0
        k = most if mid <= 0 else min(most, math.ceil(BATCH_WINDOW_NS / mid))
        size = self.link.lay_out([data])[2]
        return max(1, min(k, BATCH_BYTES // max(size, 1)))

    def batched(self, case, k, n, windows, limits):
        """Up to n windows of k calls each, every call on an input of its
        own (fresh seeds: no call can reuse another's answer), every
        output checked; their gross times into windows. A failure or None."""
        for w in range(n):
            draws = [self.draw(case, fresh=True) for _ in range(k)]
            r = self.link.timed([d for d, _ in draws], False)
            if "error" in r:
                return {"error": f"timed window {w} of {k} calls: {r['error']}"}
            for c, ((data, expected), out) in enumerate(zip(draws, r["outs"])):
                msg = r.get("misuse") or self.judge(data, expected, out)
                if msg:
                    return {"error": f"timed window {w}, call {c}: {msg}"}
            windows.append(r["ns"])
            if enough(self.link.net(windows, k), *limits, calls=k, least=MIN_WINDOWS):
                return None
        return None

    def fused(self, alone, per_call, k):
        """The reply's times from the windows of k calls, unless those calls
        ran so much faster than calls alone that the kernel must have
        worked ahead on the next call's input (the window's inputs share
        one buffer): then the calls alone count, and the report says why."""
        mid = sorted(alone)[len(alone) // 2]
        batch = sum(per_call) / len(per_call)
        out = {"batch": k, "alone_median": mid}
        if batch < FUSE_SHARE * mid - FUSE_NS:
            out["batch_refused"] = (f"{k} calls to a window took {batch / 1e3:.3f} us a call, alone {mid / 1e3:.3f} us: "
                                    "the calls alone count")
            return out
        return {**out, "times": per_call}

    def close(self):
        """Stop the worker, then measure the clock's offset again with the
        null worker (the submission is gone: nothing of it can slow the
        null calls), then stop that."""
        link = getattr(self, "link", None)
        null = getattr(link, "null", None)
        if isinstance(link, CudaLink):
            # Let go of the worker's memory while the worker still has it.
            try:
                link.forget_segments()
            except RuntimeError:
                link.segments.clear()
        for p in self.ranks or [self.peer]:
            if p is not None:
                p.stop()
        for p in self.ranks or [self.peer]:
            if p is not None:
                p.reap()
        if self.rendezvous is not None:
            self.rendezvous.close()
        if null is not None:
            try:
                self.recheck_clock()
            except Exception as e:  # noqa: BLE001 - the run's results are written: say it, do not lose them
                self.flags.append(("CLOCK_DRIFT", f"the clock's offset could not be measured again after the run: {e}"))
            finally:
                null.stop()
                null.reap()


class JudgeFailed(WorkerDied):
    """The judge itself (or the problem's reference) broke while judging:
    the box's fault, reported with exit 115 and its traceback."""

    def __init__(self, e):
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))[-4000:]
        super().__init__(f"the judge failed (not the submission): {type(e).__name__}: {e}\n{tb}", setup=True)


def wire_case(case):
    return ", ".join(f"{k}={v!r}" for k, v in case.items())
