"""The judge: the trusted half of a run, which decides every verdict and
every time without ever importing the submission.

It starts one worker (worker.py, the only process that imports the
submission), generates each input, keeps the reference's answer to
itself, hands the input over in memory the worker can only read, and
reads the output back from memory the worker cannot change afterwards.
Times are measured here:

- CPU: this process's clock from the moment the call is sent until the
  sealed output arrives (the round trip and the output's copy into its
  memfd count; they are the same for every submission of a case).
- CUDA: this process's events on its own stream. Ta and the start event S
  are recorded after a head start (a sleep kernel), the input's copy and
  the L2 flush; the worker's stream waits for S, calls custom_kernel and
  records its done event D; this process then queues a wait for D, Tb and
  the capture of the output while the GPU is still in the head start, so
  Tb marks the moment the worker's last work on its stream ended, and the
  capture happens before the worker can know whether it will be checked.
  A call whose reply came after Ta had run (the host was late) is timed
  again with a longer head start, which comes back down once replies are
  quick again. Ta to Tb also holds a fixed cost, two switches between the
  processes' contexts (~290 us on the H200): every timed call is paired
  with a call of a null worker of ours (no submission in it) timed the
  same way, and the trimmed mean of those is taken off every time.

Ranked iterations draw fresh seeds from the operating system here, and
every ranked output is checked.
"""

import ctypes
import importlib
import math
import os
import random
import signal
import subprocess
import sys
import time
import traceback

import wire

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
TARGET_REL_ERR = 0.001
# Untimed calls after the first checked one: JIT compilation and caches.
WARM_S = 0.05
# CUDA: the first head start, the longest, and how often a late call is
# timed again before its late time counts (a late time only ever grows).
HEAD_START_NS = 500_000
HEAD_START_MAX_NS = 20_000_000
LATE_RETRIES = 2
# A reply this many times quicker than the head start halves it.
HEAD_START_SLACK = 4
# Null calls at start-up, to warm the null worker and report the cost.
CALIBRATION_CALLS = 31
# The share of null times cut from each end before their mean is taken:
# a rare hiccup of the host must not move the offset.
TRIM = 0.1
# How many of the worker's memory segments the judge keeps open.
OPEN_SEGMENTS = 32
CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1


class WorkerDied(Exception):
    def __init__(self, message, setup=False):
        super().__init__(message)
        self.setup = setup  # the harness's own set-up failed, not user code


def limits_for(dev: str, kind: str):
    repeats, budget, wall = LIMITS[(dev, kind)]
    env = os.environ
    repeats = int(env.get("KERNELBOX_BENCH_MAX_REPEATS", repeats))
    budget = float(env.get("KERNELBOX_BENCH_BUDGET_S", budget))
    wall = float(env.get("KERNELBOX_BENCH_WALL_S", wall))
    return repeats, budget, wall


def stats(times):
    n = len(times)
    mean = sum(times) / n
    var = sum((t - mean) ** 2 for t in times) / (n - 1) if n > 1 else 0.0
    std = math.sqrt(var)
    return {"runs": n, "mean": mean, "std": std, "err": std / math.sqrt(n), "best": min(times), "worst": max(times)}


def enough(times, budget_s, wall_s, wall0):
    """Whether a benchmark has timed enough calls: a small enough standard
    error, or its kernel-time budget or wall cap spent (at least MIN_RUNS)."""
    if len(times) < MIN_RUNS:
        return False
    s = stats(times)
    if s["mean"] > 0 and s["err"] / s["mean"] < TARGET_REL_ERR:
        return True
    return s["mean"] * len(times) > budget_s * 1e9 or time.perf_counter() - wall0 > wall_s


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


def persisting_l2():
    """The CUDA driver's (cuCtxResetPersistingL2Cache, cuStreamSetAttribute,
    ""), or (None, None, why not): ROCm has neither, nor persisting L2."""
    try:
        cu = ctypes.CDLL("libcuda.so.1")
        reset, window = cu.cuCtxResetPersistingL2Cache, cu.cuStreamSetAttribute
    except (OSError, AttributeError) as e:
        return None, None, f"off: {e}"
    window.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)
    return reset, window, ""


def death(code) -> str:
    if code is not None and code < 0:
        how = f"was killed by {signal.Signals(-code).name}"
        if -code == signal.SIGSEGV:
            how += " (if custom_kernel wrote to its inputs: on the CPU the inputs are read-only)"
        return f"the submission's process {how}"
    return f"the submission's process exited with status {code}"


class Peer:
    """A worker process and the judge's end of its channel."""

    def __init__(self, null=False, preload=False):
        mine, theirs = wire.Channel.pair()
        fd = theirs.fileno()
        code = f"import worker; worker.main({fd}, null={null!r}, preload={preload!r})"
        self.proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=(fd,), close_fds=True)
        theirs.close()
        self.chan, self.fds, self.dead, self.done = mine, [], "", None
        # CUDA, the null worker: its input buffer and what is copied there.
        self.inp = self.private = None

    def recv(self, want_fds=False):
        """The worker's next message. With want_fds, the descriptors that
        came with it are left in self.fds for the caller to close."""
        try:
            msg, fds = self.chan.recv()
        except wire.Closed as e:
            if "closed the channel" in str(e):
                raise self.died()
            self.proc.kill()
            self.proc.wait()
            self.dead = f"the submission's process wrote garbage on the harness's channel ({e})"
            raise WorkerDied(self.dead)
        if not want_fds:
            for fd in fds:
                os.close(fd)
            fds = []
        self.fds = fds
        return msg

    def send(self, obj, fds=()):
        try:
            self.chan.send(obj, fds)
        except wire.Closed:
            raise self.died()

    def died(self, why=""):
        try:
            code = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.dead = death(code) + why
        return WorkerDied(self.dead)

    def close(self):
        self.stop()
        self.reap()

    def stop(self):
        """Tell the worker to stop; reap waits for it."""
        try:
            self.chan.send({"op": "stop"})
        except (wire.Closed, OSError):
            pass

    def reap(self, wait=5):
        try:
            self.proc.wait(wait)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.chan.close()


def maybe_cuda() -> bool:
    """Whether this machine may have a CUDA device, before torch says."""
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/kfd")


class Judge:
    """One worker and everything that judges it; ask(kind, case) answers
    as eval.Pool does. A failed start is raised by the first ask, so that
    it is reported as that case's failure."""

    def __init__(self, go=lambda: None, preload=False, standby=False):
        """go blocks until the device is this run's (a warm start: the
        sandbox's gate); everything before it touches no device and runs
        no user code. With preload the worker also imports Triton before
        the go: time that a warm start hides, and a cold one would add.
        A standby's problem comes with the go: its reference is imported
        after it."""
        self.peer = None
        self.broken = None
        self.go_at = None  # perf_counter_ns when the gate opened
        try:
            self.start(go, preload, standby)
        except WorkerDied as e:
            self.broken = e

    def start(self, go, preload, standby):
        self.peer = Peer(preload=preload and maybe_cuda())
        # On CUDA, a worker of our own that runs no submission: the judge
        # measures its clock's fixed cost against it (CudaLink.calibrate).
        null = Peer(null=True) if maybe_cuda() else None
        # The workers keep the run's compile caches (the submitter's, which
        # the worker can write); the judge compiles nothing, and the CUDA
        # driver's JIT cache is the one it could be handed code through.
        os.environ["CUDA_CACHE_DISABLE"] = "1"
        try:
            import torch

            import kbutils

            if not standby:
                import reference
        except BaseException as e:  # noqa: BLE001 - torch or the reference broke
            self.close()
            if null is not None:
                null.close()
            raise WorkerDied(f"the harness's own set-up failed: {type(e).__name__}: {e}", setup=True) from e
        go()
        self.go_at = time.perf_counter_ns()
        if standby:
            try:
                importlib.invalidate_caches()  # the run's files came with the go
                import reference
            except BaseException as e:  # noqa: BLE001 - the reference broke
                self.close()
                if null is not None:
                    null.close()
                raise WorkerDied(f"the harness's own set-up failed: {type(e).__name__}: {e}", setup=True) from e
        self.torch, self.kb, self.ref = torch, kbutils, reference
        for p in (self.peer, null):
            if p is not None:
                p.send({"op": "go"})
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
        hello = self.recv()
        self.marks["hello"] = time.perf_counter_ns() - self.go_at
        if "fatal" in hello:
            raise WorkerDied(str(hello["fatal"]), setup=True)
        if hello.get("device") != self.dev:
            raise WorkerDied(f"the worker sees device {hello.get('device')!r}, the judge {self.dev!r}", setup=True)
        if self.dev == "cuda":
            self.link = CudaLink(self, hello, null)
        else:
            if null is not None:
                null.close()
            self.link = CpuLink(self)
        self.marks["link"] = time.perf_counter_ns() - self.go_at

    # ------------------------------------------------------------ channel

    def recv(self, want_fds=False):
        msg = self.peer.recv(want_fds)
        self.fds = self.peer.fds
        return msg

    def send(self, obj, fds=()):
        self.peer.send(obj, fds)

    @property
    def dead(self):
        return self.peer.dead if self.peer is not None else ""

    # ------------------------------------------------------------- inputs

    def draw(self, case, fresh=False):
        """(input, expected output) of a case; with fresh, from a seed drawn
        here that nothing outside this process can know."""
        if fresh and case.get("seed") is not None:
            case = dict(case, seed=self.rng.getrandbits(62))
        data = self.ref.generate_input(**case)
        return data, expected_of(self.kb, self.ref, data)

    def judge(self, data, expected, out):
        ok, msg = verdict(self.kb, self.torch, self.ref, data, expected, out)
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
        try:
            return self.run(kind, case, data, expected)
        except (WorkerDied, KeyboardInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 - the reference or the judge itself broke
            return {"error": "the judge failed: " + "".join(traceback.format_exception(type(e), e, e.__traceback__))[-4000:]}

    def run(self, kind, case, data, expected):
        if kind == "test":
            r = self.link.call(data)
            if "error" in r:
                return {"error": r["error"]}
            msg = r.get("misuse") or self.judge(data, expected, r["out"])
            return {"ok": not msg, "message": msg}
        return self.benchmark(kind, case, data, expected)

    def benchmark(self, kind, case, data, expected):
        repeats, budget_s, wall_s = limits_for(self.dev, kind)
        r = self.link.call(data)
        if "error" in r:
            return {"error": r["error"]}
        msg = r.get("misuse") or self.judge(data, expected, r["out"])
        if msg:
            return {"error": msg}
        self.send({"op": "warm", "seconds": WARM_S})
        reply = self.recv()
        if "error" in reply:
            return {"error": str(reply["error"])}
        self.link.prepare()
        selftime = os.environ.get("KERNELBOX_JUDGE_SELFTIME") == "1"
        times, own = [], []
        wall0 = time.perf_counter()
        for i in range(repeats):
            if kind == "leaderboard":
                data, expected = self.draw(case, fresh=True)
            r = self.link.timed(data, selftime)
            if "error" in r:
                return {"error": f"timed iteration {i}: {r['error']}"}
            msg = r.get("misuse") or self.judge(data, expected, r["out"])
            if msg:
                return {"error": f"timed iteration {i}: {msg}"}
            times.append(r["ns"])
            if r.get("own") is not None:
                own.append(r["own"])
            if enough(self.link.net(times), budget_s, wall_s, wall0):
                break
        reply = {"times": self.link.net(times), **self.link.report()}
        if own:
            reply["worker_mean"] = sum(own) / len(own)
        return reply

    def close(self):
        # Both stop at once: each tears its CUDA context down as it exits.
        peers = [p for p in (self.peer, getattr(getattr(self, "link", None), "null", None)) if p is not None]
        for p in peers:
            p.stop()
        for p in peers:
            p.reap()


def wire_case(case):
    return ", ".join(f"{k}={v!r}" for k, v in case.items())


class CpuLink:
    """Inputs in sealed memfds the worker maps read-only; outputs in sealed
    memfds of the worker's, read once the reply is here."""

    def __init__(self, judge):
        self.j = judge

    def prepare(self):
        pass

    def report(self):
        return {}

    def net(self, times):
        """The times with the clock's fixed cost taken off: on the CPU the
        round trip is part of every submission's time alike."""
        return times

    def call(self, data):
        return self.timed(data, False)

    def timed(self, data, selftime):
        j, torch = self.j, self.j.torch
        tensors = []
        tree = wire.flatten(torch, data, tensors)
        metas, size = wire.metas_of(torch, tensors)
        fd = wire.sealed_memfd("kernelbox-input", torch, tensors, metas, size)
        try:
            j.send({"op": "input", "data": tree, "tensors": metas, "size": size}, (fd,))
        finally:
            os.close(fd)
        reply = j.recv()
        if "error" in reply:
            return {"error": str(reply["error"])}
        t0 = time.perf_counter_ns()
        j.send({"op": "call"})
        reply = j.recv(want_fds=True)
        ns = time.perf_counter_ns() - t0
        fds = j.fds
        try:
            if "error" in reply:
                return {"error": str(reply["error"])}
            return {"out": self.output(reply, fds), "ns": float(ns)}
        except ValueError as e:
            return {"error": f"the submission's process broke the protocol: {e}"}
        finally:
            for f in fds:
                os.close(f)

    def output(self, reply, fds):
        torch = self.j.torch
        metas, size = reply.get("tensors"), reply.get("size")
        if len(fds) != 1 or not wire.is_sealed(fds[0]):
            raise ValueError("its output did not come in one sealed memfd")
        if not isinstance(size, int) or size < 0 or os.fstat(fds[0]).st_size < size:
            raise ValueError("its output's size does not add up")
        why = wire.check_metas(torch, metas, size)
        if why:
            raise ValueError(why)
        flat = wire.read_memfd(torch, fds[0], size)
        return wire.unflatten(reply.get("out"), wire.views(torch, flat, metas))


class CudaLink:
    """Inputs in device memory this process allocates with the driver (not
    torch's allocator, whose segments would expose what else they hold);
    outputs read from the worker's own memory, opened here by IPC handle."""

    def __init__(self, judge, hello, null):
        self.j = judge
        torch = self.torch = judge.torch
        self.drv = wire.Driver()
        torch.empty(1, device="cuda")
        judge.peer.done = self.event_of(hello)
        self.start = torch.cuda.Event(interprocess=True)
        self.start_handle = bytes(self.start.ipc_handle()).hex()
        self.ta, self.tb = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self.inp, self.cap = None, 0  # (ptr, flat) of the worker's shared input
        self.segments = {}  # a worker's handle -> (ptr here, size)
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        l2 = getattr(props, "L2_cache_size", 0) or (128 << 20)
        self.flush_buf = torch.empty(max(2 * l2, 256 << 20) // 4, dtype=torch.int32, device="cuda")
        self.l2_reset, self.l2_window, self.l2_status = persisting_l2()
        self.no_window = ctypes.create_string_buffer(64)
        self.sleep = getattr(torch.cuda, "_sleep", None)
        self.cycles_per_ns = self.calibrate()
        self.head_ns = HEAD_START_NS
        self.late = self.retries = 0
        self.nulls = []  # this benchmark's null times
        self.null, self.null_status = None, "off: no null worker"
        self.start_null(null)

    def event_of(self, hello):
        return self.torch.cuda.Event.from_ipc_handle(self.torch.cuda.current_device(), bytes.fromhex(hello["done"]))

    # ------------------------------------------------------------ the null worker

    def start_null(self, null):
        """Set up the null worker (ours, no submission in it: its kernel
        returns a tensor it made at start) with an input buffer of its own,
        and time CALIBRATION_CALLS of its calls for the report. Without it
        no time can be netted, and the run fails at its first benchmark."""
        if null is None:
            return
        torch = self.torch
        try:
            hello = null.recv()
            if "fatal" in hello:
                raise WorkerDied(str(hello["fatal"])[-300:])
            null.done = self.event_of(hello)
            ptr = self.drv.alloc(1 << 12)
            null.inp = (ptr, wire.device_bytes(torch, ptr, 1 << 12))
            for msg in ({"op": "buffers", "input": {"handle": self.drv.export(ptr), "size": 1 << 12}, "start": self.start_handle},
                        {"op": "input", "data": {"t": 0}, "tensors": [{"dtype": "uint8", "shape": [256], "offset": 0, "nbytes": 256}], "size": 256}):
                null.send(msg)
                reply = null.recv()
                if "error" in reply:
                    raise WorkerDied(str(reply["error"])[-300:])
            null.private = torch.zeros(256, dtype=torch.uint8, device="cuda")
            self.null = null
            times = []
            for _ in range(3 * CALIBRATION_CALLS):
                t = self.null_time()
                if t is not None:
                    times.append(t)
                if len(times) == CALIBRATION_CALLS:
                    break
            self.nulls = []
            if len(times) < CALIBRATION_CALLS // 2:
                raise WorkerDied("the null worker's replies kept coming late")
            times.sort()
            n = len(times)
            self.null_status = f"ok: at start median {times[n // 2]:.0f} ns, p10 {times[n // 10]:.0f}, p90 {times[(9 * n) // 10]:.0f}"
        except WorkerDied as e:
            self.null_status = f"off: {e}"
            self.null = None
            null.close()

    def null_time(self):
        """One call of the null worker, timed as a submission's call is;
        None when its reply came late (the time would hold the host's
        delay, not the clock's cost)."""
        null = self.null
        r = self.once({"op": "call"}, null.private, 256, null, null.inp[1])
        if "error" in r:
            raise WorkerDied(f"the null worker failed: {r['error'][-300:]}", setup=True)
        if r["late"]:
            # In a sandbox under a CPU quota a reply can wait out a
            # throttled period: a longer head start, as for a real call
            # (which halves it again once replies are quick).
            self.head_ns = min(2 * self.head_ns, HEAD_START_MAX_NS)
            return None
        self.nulls.append(r["ns"])
        return r["ns"]

    def offset(self):
        """The clock's fixed cost in this benchmark: the trimmed mean of
        its null times, and their count."""
        times = sorted(self.nulls)
        cut = int(len(times) * TRIM)
        kept = times[cut:len(times) - cut] or times
        return (sum(kept) / len(kept) if kept else 0.0), len(times)

    def net(self, times):
        off, _ = self.offset()
        return [max(t - off, 0.0) for t in times]

    # ---------------------------------------------------------------- timing

    def calibrate(self):
        """The sleep kernel's cycles per ns, for head starts of a given
        length."""
        if self.sleep is None:
            return 0.0
        torch, probe = self.torch, 1 << 21
        for _ in range(2):  # the first loads the sleep kernel
            torch.cuda.synchronize()
            self.ta.record()
            self.sleep(probe)
            self.tb.record()
            self.tb.synchronize()
        ns = self.ta.elapsed_time(self.tb) * 1e6
        return probe / ns if ns > 0 else 0.0

    def prepare(self):
        self.late = self.retries = 0
        self.nulls = []

    def report(self):
        off, n = self.offset()
        return {"late": self.late, "retries": self.retries, "head_start_ns": self.head_ns, "l2_reset": self.l2_status or "ok",
                "segments": len(self.segments), "offset": f"{self.null_status}; this benchmark {off:.0f} ns over {n} null calls"}

    def reset_l2(self):
        """Undo what a call can leave persisting in L2 (lines marked
        persisting, an access policy window on our stream), so the flush
        evicts everything. The driver's reset is not stream-ordered: called
        with the device idle."""
        if self.l2_reset is None:
            return
        stream = ctypes.c_void_p(self.torch.cuda.current_stream().cuda_stream)
        rc = self.l2_window(stream, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, self.no_window)
        if rc:
            self.l2_status = self.l2_status or f"cuStreamSetAttribute: CUresult {rc}"
        rc = self.l2_reset()
        if rc:
            self.l2_status = self.l2_status or f"cuCtxResetPersistingL2Cache: CUresult {rc}"

    def ensure(self, size):
        """A shared input buffer of at least size bytes, announced to the
        worker; why not, or ""."""
        if self.inp is not None and size <= self.cap:
            return ""
        torch, drv, j = self.torch, self.drv, self.j
        torch.cuda.synchronize()
        if self.inp is not None:
            j.send({"op": "release"})
            reply = j.recv()
            if "error" in reply:
                return str(reply["error"])
            drv.free(self.inp[0])
            self.inp = None
        cap = max(wire.aligned(size), 1 << 20)
        ptr = drv.alloc(cap)
        self.inp, self.cap = (ptr, wire.device_bytes(torch, ptr, cap)), cap
        j.send({"op": "buffers", "input": {"handle": drv.export(ptr), "size": cap}, "start": self.start_handle})
        reply = j.recv()
        return str(reply["error"]) if "error" in reply else ""

    def call(self, data):
        return self.timed(data, False, retry=False)

    def timed(self, data, selftime, retry=True):
        """One call of the submission on data, timed (gross: net() takes
        the clock's cost off) and paired with a null call when retry is
        set, that is, when the time counts."""
        torch = self.torch
        if retry and self.null is None:
            # The box's failure, never the submission's: no made-up time.
            raise WorkerDied(f"the judge cannot time calls on this GPU: its null worker is {self.null_status}", setup=True)
        tensors = []
        tree = wire.flatten(torch, data, tensors)
        metas, size = wire.metas_of(torch, tensors)
        why = self.ensure(size)
        if why:
            return {"error": f"the worker could not open the input: {why}"}
        private = torch.zeros(max(size, 1), dtype=torch.uint8, device="cuda")
        for t, m in zip(tensors, metas):
            if m["nbytes"]:
                private[m["offset"]:m["offset"] + m["nbytes"]].copy_(wire.raw_bytes(torch, t.to("cuda")))
        j = self.j
        j.send({"op": "input", "data": tree, "tensors": metas, "size": size})
        reply = j.recv()
        if "error" in reply:
            return {"error": str(reply["error"])}
        msg = {"op": "call", "selftime": selftime}
        for attempt in range(LATE_RETRIES + 1 if retry else 1):
            r = self.once(msg, private, size, j.peer, self.inp[1])
            if "error" in r or not r.pop("late"):
                break
            if attempt < LATE_RETRIES:
                self.retries += 1
                self.head_ns = min(2 * self.head_ns, HEAD_START_MAX_NS)
            else:
                self.late += 1
        if "error" not in r and not torch.equal(self.inp[1][:size], private[:size]):
            r["misuse"] = "custom_kernel modified its input; inputs must be left as they were"
        if "error" not in r and retry:
            for _ in range(LATE_RETRIES + 1):
                if self.null_time() is not None:
                    break
        return r

    def once(self, msg, private, size, peer, inp):
        """One call: its gross time, its output as captured at Tb, and
        whether the reply came too late for Tb to be queued in the head
        start."""
        torch = self.torch
        torch.cuda.synchronize()
        self.reset_l2()
        cycles = int(self.cycles_per_ns * self.head_ns)
        if cycles > 0:
            self.sleep(cycles)
        inp[:size].copy_(private[:size])
        self.flush_buf.zero_()
        self.ta.record()
        self.start.record()
        sent = time.perf_counter_ns()
        peer.send(msg)
        reply = peer.recv()
        host_ns = time.perf_counter_ns() - sent
        if "error" in reply:
            torch.cuda.synchronize()
            return {"error": str(reply["error"])}
        try:
            srcs = self.sources(reply)
        except (ValueError, RuntimeError) as e:
            torch.cuda.synchronize()
            return {"error": f"the submission's process broke the protocol: {e}"}
        torch.cuda.current_stream().wait_event(peer.done)
        self.tb.record()
        caps = [s.clone() for s in srcs]
        late = self.ta.query()
        self.tb.synchronize()
        ns = self.ta.elapsed_time(self.tb) * 1e6
        torch.cuda.synchronize()
        if peer is self.j.peer and not late and host_ns * HEAD_START_SLACK < self.head_ns:
            # A one-off delay (a first call, a new allocation to open) must
            # not leave every later call sleeping through a long head start.
            # Only the submission's replies count: the null worker's are
            # always quick.
            self.head_ns = max(self.head_ns // 2, HEAD_START_NS)
        r = {"ns": ns, "late": late}
        if not all(torch.equal(c, s) for c, s in zip(caps, srcs)):
            r["misuse"] = "the output changed after custom_kernel's stream said it was done"
        metas = reply["tensors"]
        r["out"] = wire.unflatten(reply["out"], [c.view(getattr(torch, m["dtype"])).reshape(m["shape"]) if m["nbytes"] else
                                                 torch.empty(m["shape"], dtype=getattr(torch, m["dtype"]), device="cuda")
                                                 for c, m in zip(caps, metas)])
        if msg.get("selftime"):
            peer.send({"op": "selftime"})
            r["own"] = peer.recv().get("ns")
        return r

    def sources(self, reply):
        """Flat uint8 views of each output tensor in the worker's memory."""
        torch = self.torch
        metas, where = reply.get("tensors"), reply.get("at")
        if wire.check_metas(torch, metas, wire.MAX_BYTES) or not isinstance(where, list) or len(where) != len(metas):
            raise ValueError("its output's layout does not add up")
        out = []
        for m, at in zip(metas, where):
            if not m["nbytes"]:
                out.append(torch.empty(0, dtype=torch.uint8, device="cuda"))
                continue
            if not isinstance(at, dict) or not isinstance(at.get("offset"), int) or at["offset"] < 0:
                raise ValueError("an output tensor's place is not named")
            ptr, seg = self.segment(str(at.get("handle")))
            if at["offset"] + m["nbytes"] > seg:
                raise ValueError("an output tensor lies outside its memory")
            out.append(wire.device_bytes(torch, ptr + at["offset"], m["nbytes"]))
        return out

    def forget_segments(self):
        self.torch.cuda.synchronize()
        for ptr, _ in self.segments.values():
            self.drv.close(ptr)
        self.segments.clear()

    def segment(self, handle):
        seg = self.segments.get(handle)
        if seg is None:
            if len(self.segments) >= OPEN_SEGMENTS:
                self.forget_segments()
            ptr = self.drv.open(handle)
            seg = self.segments[handle] = (ptr, self.drv.extent(ptr))
        return seg
