"""The older path for a multi-GPU problem's ranks on CUDA (and its
profile mode), until the judge's clock spans several devices
(ranklink.py times the ranks on the CPU backend).

Each rank is a worker process of its own that imports the submission,
draws its inputs from the case's seed (a fixed step a ranked iteration)
and times its calls with its own clock between barriers; eval.py's
process checks every checked output again and a sample of the ranked
ones, and the names the worker's timing and checks stand on are checked
for identity after every job. Weaker than the judge: docs/integrity.md.
"""

import datetime
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import wire
from judge import WorkerDied, enough, expected_of, limits_for, plain_output, stats, verdict  # noqa: F401 (guarded names)
from ranklink import PEER_GRACE_S, RANK_ENV, RANK_TIMEOUT_S, rank_inputs, ranks_expected, world_of
from wire import DTYPES

RANKED_SEED_STEP = 13

# The share of ranked iterations whose output the harness's own process
# checks again (every checked call and test is); the worker does not know
# which until its call has returned.
SAMPLE_FRACTION = 0.1
# The most a handed-over output may take (bytes).
MAX_HANDOVER = 8 << 30
PEER_FAILED = "another rank failed"


# What the harness's timing and checking stand on, checked for identity
# after every job the worker runs.
GUARDED = (
    "torch.cuda.synchronize", "torch.cuda.Event", "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize", "torch.allclose", "torch.equal", "torch.isclose", "torch.Tensor.clone",
    "time.perf_counter_ns", "time.perf_counter", "time.time",
    "kbutils.clone_data", "kbutils.same_data", "kbutils.verbose_allclose", "kbutils.compare_outputs", "kbutils.tensor_mismatch",
    "reference.generate_input", "reference.check_implementation", "reference.ref_kernel",
    # What inputs are drawn with: a hook there sees each input before the
    # timed call does and can compute its answer outside the window.
    "kbutils.generator", "torch.randn", "torch.rand", "torch.randint", "torch.randperm", "torch.normal",
    "torch.randn_like", "torch.rand_like", "torch.randint_like", "torch.Generator",
    "torch.Tensor.normal_", "torch.Tensor.uniform_", "torch.Tensor.random_",
    # Multi-GPU timing and agreement between ranks.
    "torch.distributed.barrier", "torch.distributed.all_reduce",
    # The harness's own worker half, which a submission can import as gang.
    "gang._Worker.check", "gang._Worker.run_checked", "gang._Worker.benchmark",
    "gang._Worker.expected", "gang._Worker.flush_l2", "gang._Worker.hand_over", "gang._Worker.ship",
    "gang.plain_output", "gang.stats", "gang.verdict", "gang.expected_of", "gang.ranked_case",
    "gang.ranks_expected", "gang.rank_inputs", "gang._Worker.agree", "gang._Worker.benchmark_ranks",
    "gang._Worker.judge", "gang.enough",
)


def resolve(roots, name):
    head, *rest = name.split(".")
    obj = roots[head]
    for part in rest:
        obj = getattr(obj, part)
    return obj



def ranked_case(case, iteration):
    """The case of a ranked iteration: fresh inputs every call."""
    if iteration is None or case.get("seed") is None:
        return case
    return dict(case, seed=case["seed"] + RANKED_SEED_STEP * (iteration + 1))


# ---------------------------------------------------------------- worker side
# Everything below runs in the worker, next to the submission.


class _Worker:
    def __init__(self, rank=None, world=None, store=None):
        import torch  # noqa: F401  (first, so import errors name torch)
        import kbutils
        import reference

        self.rank, self.world, self.dist = rank, world, None
        if world is not None:
            # Before the submission loads, and before anything touches the
            # device: this rank's GPU is the world's rank-th.
            import torch.distributed as dist

            if kbutils.device() == "cuda":
                torch.cuda.set_device(rank)
            else:
                torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // world))
            backend = "nccl" if kbutils.device() == "cuda" else "gloo"
            dist.init_process_group(backend, init_method="file://" + store, rank=rank, world_size=world,
                                    timeout=datetime.timedelta(seconds=RANK_TIMEOUT_S))
            self.dist = dist
        self.torch = torch
        self.kb = kbutils
        self.ref = reference
        self.dev = kbutils.device()
        self.kernel = None
        self.flush_buf = None
        self.link = None  # (jobs, replies) of worker_main, for hand_over
        self.ship_fd = None
        # What the harness relies on, bound before the submission loads: a
        # submission that replaces any of them is caught (tampered) and
        # cannot slow the clock the harness itself reads.
        self.clock = time.perf_counter_ns
        self.modules = self.roots()
        self.bound = {}
        for name in GUARDED:
            try:
                self.bound[name] = resolve(self.modules, name)
            except AttributeError:
                pass  # a reference without ref_kernel, say
        if self.dev == "cuda":
            self.flush_l2()

    def roots(self):
        return {"torch": self.torch, "time": time, "kbutils": self.kb, "reference": self.ref, "gang": sys.modules[__name__]}

    def tampered(self, _resolve=resolve):
        """The guarded names whose object is no longer the one bound (with
        resolve as it was when the harness loaded)."""
        roots = self.modules
        out = []
        for name, obj in self.bound.items():
            try:
                now = _resolve(roots, name)
            except AttributeError:
                now = None
            if now is not obj:
                out.append(name)
        return out

    def load_submission(self):
        if self.kernel is None:
            from worker import load_kernel

            self.kernel = load_kernel()
        return self.kernel

    def sync(self):
        if self.dev == "cuda":
            self.torch.cuda.synchronize()

    def expected(self, data):
        """The reference's answer, computed before the submission runs."""
        return expected_of(self.kb, self.ref, data)

    def check(self, data, expected, output):
        return verdict(self.kb, self.torch, self.ref, data, expected, output)

    def judge(self, i, arg, data, expected, out):
        """Why timed iteration i's call was wrong, or "": its input left as
        it was, its output right, and the harness's own process agreeing
        when it asks for this one."""
        if not self.kb.same_data(arg, data):
            return "custom_kernel modified its input; inputs must be left as they were"
        ok, msg = self.check(data, expected, out)
        return self.hand_over(out, i, ask=True) if ok else msg

    def hand_over(self, out, iteration=None, ask=False):
        """Give an output to the harness's own process, which checks it
        again where the submission cannot reach; its objection, or "".
        With ask, first ask whether it wants this one: it samples ranked
        iterations, and says which only after the call has returned."""
        if self.link is None:
            return ""
        jobs, replies = self.link
        if ask:
            _send(replies, {"sample": iteration})
            if not json.loads(jobs.readline()).get("ship"):
                return ""
        meta = self.ship(out)
        meta["iteration"] = iteration
        _send(replies, {"shipped": meta})
        return str(json.loads(jobs.readline()).get("error") or "")

    def ship(self, out):
        """Write the output's bytes into the shared memory file."""
        torch = self.torch
        seq = isinstance(out, (tuple, list))
        items = list(out) if seq else [out]
        metas, offset = [], 0
        os.ftruncate(self.ship_fd, 0)
        for t in items:
            if not isinstance(t, torch.Tensor) or type(t) is not torch.Tensor or t.device.type == "meta":
                return {"error": f"the output holds a {type(t).__name__}, not a plain tensor"}
            raw = t.detach().contiguous().reshape(-1).view(torch.uint8).cpu().numpy()
            os.pwrite(self.ship_fd, memoryview(raw), offset)
            metas.append({"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "offset": offset, "nbytes": raw.nbytes})
            offset += raw.nbytes
        return {"tensors": metas, "sequence": seq}

    def run_once(self, case):
        """Generate, compute the reference first, run the submission on a
        clone and check it against the pristine input. Returns (ok, message)."""
        data, expected = self.inputs(case)
        return self.run_checked(self.load_submission(), data, expected)

    def inputs(self, case):
        """(the input this process's call gets, its expected output)."""
        if self.world is None:
            data = self.ref.generate_input(**case)
            return data, self.expected(data)
        datas = rank_inputs(self.ref, case)
        return datas[self.rank], ranks_expected(self.kb, self.ref, datas)[self.rank]

    def agree(self, failed, stop=False):
        """(whether any rank failed, whether rank 0 says stop): every rank
        leaves a loop at the same call, or the others would wait in a
        collective for it."""
        torch = self.torch
        flags = torch.tensor([int(bool(failed)), int(bool(stop) and self.rank == 0)], dtype=torch.int64, device=self.dev)
        self.dist.all_reduce(flags, op=self.dist.ReduceOp.MAX)
        failed, stop = flags.tolist()
        return bool(failed), bool(stop)

    def barrier(self):
        self.sync()
        if self.dev == "cuda":
            self.dist.barrier(device_ids=[self.rank])
        else:
            self.dist.barrier()

    def benchmark_ranks(self, case, kind, recheck):
        """A multi-GPU benchmark: every rank calls the submission together,
        between barriers; rank 0's clock times the calls and decides when
        to stop, and every rank's output is checked."""
        repeats, budget_s, wall_s = limits_for(self.dev, kind)
        kernel = self.load_submission()
        data, expected = self.inputs(case)
        ok, msg = self.run_checked(kernel, data, expected)
        if self.agree(not ok)[0]:
            return {"error": msg if not ok else PEER_FAILED, "peer": ok}
        t_end = time.perf_counter() + 0.05
        for _ in range(100):
            kernel(self.kb.clone_data(data))
            self.sync()
            if self.agree(False, time.perf_counter() > t_end)[1]:
                break
        times = []
        wall0 = time.perf_counter()
        seed = case.get("seed")
        for i in range(repeats):
            if recheck and seed is not None:
                data, expected = self.inputs(ranked_case(case, i))
            arg = self.kb.clone_data(data)
            self.flush_l2()
            self.barrier()
            t0 = self.clock()
            out = kernel(arg)
            self.barrier()
            times.append(float(self.clock() - t0))
            msg = self.judge(i, arg, data, expected, out) if recheck else ""
            del out, arg
            failed, stop = self.agree(bool(msg), enough(times, budget_s, wall_s, wall0))
            if failed:
                return {"error": f"timed iteration {i}: {msg}" if msg else PEER_FAILED, "peer": not msg}
            if stop:
                break
        return {"times": times}

    def run_checked(self, kernel, data, expected):
        arg = self.kb.clone_data(data)
        out = kernel(arg)
        self.sync()
        if not self.kb.same_data(arg, data):
            return False, "custom_kernel modified its input; inputs must be left as they were"
        ok, msg = self.check(data, expected, out)
        if ok:
            msg = self.hand_over(out)
            ok = not msg
        return ok, msg

    def flush_l2(self):
        if self.dev != "cuda":
            return
        if self.flush_buf is None:
            props = self.torch.cuda.get_device_properties(0)
            l2 = getattr(props, "L2_cache_size", 0) or (128 << 20)
            self.flush_buf = self.torch.empty(max(2 * l2, 256 << 20) // 4, dtype=self.torch.int32, device="cuda")
        self.flush_buf.zero_()

    def benchmark(self, case, kind, recheck):
        """The ranks of a multi-GPU run time themselves; a one-GPU run is
        timed by the judge (judge.py), never here."""
        if self.world is None:
            raise RuntimeError("a one-device benchmark runs through the judge, not gang._Worker")
        return self.benchmark_ranks(case, kind, recheck)

    def profile(self, case):
        """One rank of a multi-GPU run's profile; a one-device run is
        profiled through the judge (worker.Worker.profile)."""
        if self.world is None:
            raise RuntimeError("a one-device profile runs through the judge, not gang._Worker")
        torch = self.torch
        kernel = self.load_submission()
        data = rank_inputs(self.ref, case)[self.rank]
        kernel(self.kb.clone_data(data))  # compile and warm up outside the profile
        self.sync()
        arg = self.kb.clone_data(data)
        if os.environ.get("POPCORN_NCU") == "1":
            # The runner wraps us in ncu --nvtx-include custom_kernel/: only
            # the kernels of this call are profiled.
            if self.dev == "cuda":
                torch.cuda.nvtx.range_push("custom_kernel")
            kernel(arg)
            self.sync()
            if self.dev == "cuda":
                torch.cuda.nvtx.range_pop()
            return {"report": "profiled by ncu (NVTX range custom_kernel); its summary follows the benchmarks"}
        acts = [torch.profiler.ProfilerActivity.CPU]
        sort = "self_cpu_time_total"
        if self.dev == "cuda":
            acts.append(torch.profiler.ProfilerActivity.CUDA)
            sort = "self_cuda_time_total"
        with torch.profiler.profile(activities=acts) as prof:
            if self.dev == "cuda":
                torch.cuda.nvtx.range_push("custom_kernel")
            kernel(arg)
            self.sync()
            if self.dev == "cuda":
                torch.cuda.nvtx.range_pop()
        return {"report": prof.key_averages().table(sort_by=sort, row_limit=20)}


def _describe(exc: BaseException) -> str:
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    # Keep the user's frames, drop the harness's own plumbing at the top.
    text = "".join(tb)
    return text[-4000:]


def _send(wfile, obj):
    wfile.write(json.dumps(obj) + "\n")
    wfile.flush()


def worker_main(job_fd: int, reply_fd: int, ship_fd: int = -1, rank=None, world=None, store=None):
    """The worker: answers jobs, one JSON line each way, until told to stop.
    JSON rather than pickle: the parent must never unpickle what a process
    running user code wrote. With world, it is one rank of a multi-GPU run."""
    jobs = os.fdopen(job_fd, "r")
    replies = os.fdopen(reply_fd, "w")
    try:
        w = _Worker(rank, world, store)
    except BaseException as e:  # noqa: BLE001 - everything is reported
        _send(replies, {"fatal": "harness set-up failed: " + _describe(e)})
        return
    if ship_fd >= 0:
        w.link, w.ship_fd = (jobs, replies), ship_fd
    # Bound before the submission loads: replacing them later changes
    # nothing here.
    send, tampered = _send, w.tampered
    while True:
        line = jobs.readline()
        if not line:
            return
        job = json.loads(line)
        if job is None:
            return
        kind, case = job["kind"], job["case"]
        try:
            if kind == "test":
                ok, msg = w.run_once(case)
                reply = {"ok": ok, "message": msg}
            elif kind == "profile":
                reply = w.profile(case)
            else:
                reply = w.benchmark(case, kind, recheck=(kind == "leaderboard"))
        except TypeError as e:
            reply = {"error": _describe(e), "bad_case": "generate_input" in traceback.format_exc()}
        except BaseException as e:  # noqa: BLE001 - a submission may raise anything
            reply = {"error": _describe(e)}
        bad = tampered()
        if bad:
            why = f"the submission replaced {', '.join(bad)}: the harness's timers, checks and helpers are not to be touched"
            reply = {"ok": False, "message": why} if kind == "test" else {"error": why}
        send(replies, reply)


# ---------------------------------------------------------------- main side


class _Checker:
    """The second check, in the harness's own process: it generates each
    handed-over output's input again from the case, computes the
    reference's answer and judges the output read from shared memory, with
    its own torch, kbutils and reference, which the submission never
    touched."""

    def __init__(self, fd):
        import random

        import torch
        import kbutils
        import reference

        self.fd, self.torch, self.kb, self.ref = fd, torch, kbutils, reference
        self.dev = kbutils.device()
        self.rng = random.SystemRandom()
        # The ranks of a multi-GPU run share this checker, one thread each,
        # and the inputs and answers of the case they last handed over.
        self.lock = threading.Lock()
        self.ranks = None  # (case spec, inputs, expected outputs)

    def pick(self):
        return self.rng.random() < SAMPLE_FRACTION

    def receive(self, fd, meta):
        """The output from shared memory, or a string saying what is wrong."""
        torch = self.torch
        if not isinstance(meta, dict) or "error" in meta:
            return str(meta.get("error") if isinstance(meta, dict) else "the hand-over is not an object")
        size = os.fstat(fd).st_size
        out = []
        for m in meta.get("tensors") or []:
            dtype, shape = m.get("dtype"), m.get("shape")
            if dtype not in DTYPES or not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
                return f"the hand-over names dtype {dtype!r} and shape {shape!r}"
            dt = getattr(torch, dtype)
            n = math.prod(shape) * torch.empty((), dtype=dt).element_size()
            off = m.get("offset")
            if not isinstance(off, int) or off < 0 or m.get("nbytes") != n or off + n > min(size, MAX_HANDOVER):
                return "the hand-over's sizes do not add up"
            raw = bytearray(os.pread(fd, n, off)) if n else bytearray(1)
            t = torch.frombuffer(raw, dtype=torch.uint8)[:n].view(dt).reshape(shape)
            out.append(t.to(self.dev))
        if not out and not meta.get("sequence"):
            return "the hand-over holds no tensor"
        return tuple(out) if meta.get("sequence") else out[0]

    def verify(self, case, meta, fd=None, rank=None):
        """The objection to one handed-over output (from rank's memfd in a
        multi-GPU run), or ""."""
        with self.lock:
            out = self.receive(self.fd if fd is None else fd, meta)
            if isinstance(out, str):
                return out
            iteration = meta.get("iteration")
            if iteration is not None and not isinstance(iteration, int):
                return "the hand-over names no iteration"
            case = ranked_case(case, iteration)
            if rank is None:
                data = self.ref.generate_input(**case)
                expected = expected_of(self.kb, self.ref, data)
            else:
                # Every rank hands over its output of the same call: draw
                # the inputs and run the reference once for all of them.
                key = repr(sorted(case.items()))
                if self.ranks is None or self.ranks[0] != key:
                    datas = rank_inputs(self.ref, case)
                    self.ranks = (key, datas, ranks_expected(self.kb, self.ref, datas))
                data, expected = self.ranks[1][rank], self.ranks[2][rank]
            ok, msg = verdict(self.kb, self.torch, self.ref, data, expected, out)
            return "" if ok else (msg or "wrong result")


class CheckerLoad:
    """The second check's _Checker, loaded in a thread (fd None: a mode that
    checks nothing)."""

    def __init__(self, fd):
        self.fd = fd
        self.checker = self.error = None
        self.loading = threading.Thread(target=self._load if fd is not None else None, name="checker", daemon=True)
        self.loading.start()

    def _load(self):
        try:
            self.checker = _Checker(self.fd)
        except Exception as e:  # noqa: BLE001 - torch or the reference broke here too
            self.error = e

    def get(self):
        self.loading.join()
        if self.checker is None and self.error is None:
            raise WorkerDied("the submission's process handed over an output in a mode that checks none")
        if self.checker is None:
            raise WorkerDied("the harness's own check could not start: " + _describe(self.error), setup=True)
        return self.checker


class Pool:
    """One worker process and two pipes to it. The worker is a fresh
    interpreter (not a fork), started without the result descriptor and
    without POPCORN_SEED in its environment."""

    def __init__(self, check=True, rank=None, world=None, store=None, loader=None):
        job_r, self.job_w = os.pipe()
        self.reply_r, reply_w = os.pipe()
        # Outputs handed over for the second check: shared memory, no path.
        self.ship_fd = os.memfd_create("kernelbox-outputs")
        self.rank = rank
        # The second check's torch, reference and device context load while
        # the worker starts, not after it: on a GPU that is seconds. The
        # ranks of a gang share one.
        self.loader = loader or CheckerLoad(self.ship_fd if check else None)
        code = wire.SAFE_PATH + f"import gang; gang.worker_main({job_r}, {reply_w}, {self.ship_fd}, {rank!r}, {world!r}, {store!r})"
        env = None
        if world is not None:
            env = dict(os.environ, **RANK_ENV)
        self.proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=(job_r, reply_w, self.ship_fd), close_fds=True, env=env)
        os.close(job_r)
        os.close(reply_w)
        self.jobs = os.fdopen(self.job_w, "w")
        self.replies = os.fdopen(self.reply_r, "r")

    def _died(self, why=""):
        try:
            code = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        if code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
        else:
            how = f"exited with status {code}"
        return WorkerDied(f"the submission's process {how}{why}")

    def _read(self):
        try:
            line = self.replies.readline()
        except (BrokenPipeError, ConnectionResetError):
            raise self._died()
        if not line:
            raise self._died()
        try:
            reply = json.loads(line)
            if not isinstance(reply, dict):
                raise ValueError("not an object")
        except ValueError:
            self.proc.kill()
            raise WorkerDied("the submission's process wrote garbage on the harness's channel")
        if "fatal" in reply:
            raise WorkerDied(reply["fatal"], setup=True)
        return reply

    def _answer(self, obj):
        try:
            _send(self.jobs, obj)
        except (BrokenPipeError, ConnectionResetError):
            raise self._died()

    def ask(self, kind, case):
        """One job, and the conversation it holds: the worker hands over
        each checked output (and the ranked iterations this process picks
        at random once their call has returned), which this process checks
        itself. Its verdict wins over the worker's, and a worker that skips
        the hand-overs fails."""
        self._answer({"kind": kind, "case": case})
        failure, shipped, queries, pending = "", 0, 0, False
        while True:
            reply = self._read()
            if "sample" in reply:
                if pending:
                    failure = failure or "the submission's process skipped a hand-over"
                queries += 1
                pending = self.checker_for().pick()
                self._answer({"ship": pending})
            elif "shipped" in reply:
                meta = reply["shipped"]
                iteration = meta.get("iteration") if isinstance(meta, dict) else None
                if iteration is None:
                    shipped += 1
                elif not pending:
                    failure = failure or "the submission's process handed over an output it was not asked for"
                pending = False
                msg = self.checker_for().verify(case, meta, self.ship_fd, self.rank)
                if msg:
                    where = "" if iteration is None else f"timed iteration {iteration}: "
                    failure = failure or f"{where}the harness's own check: {msg}"
                self._answer({"error": msg} if msg else {"ok": True})
            else:
                break
        if not failure and kind != "profile":
            failure = self._skipped(kind, case, reply, shipped, queries, pending)
        if failure:
            return {"ok": False, "message": failure} if kind == "test" else {"error": failure}
        return reply

    @staticmethod
    def _skipped(kind, case, reply, shipped, queries, pending):
        """Why a reply that claims success skipped the hand-overs, or ""."""
        passed = reply.get("ok") if kind == "test" else "times" in reply
        if not passed:
            return ""
        if shipped != 1 or pending:
            return "the submission's process did not hand over its output for the harness's own check"
        times = reply.get("times")
        if kind == "leaderboard" and case.get("seed") is not None and isinstance(times, list) and queries != len(times):
            return f"the submission's process skipped the harness's checks ({queries} of {len(times)} timed iterations)"
        return ""

    def checker_for(self):
        return self.loader.get()

    def close(self):
        self.loader.loading.join()
        try:
            _send(self.jobs, None)
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Gang:
    """The workers of a multi-GPU run, one a rank, sharing one second check.
    A job goes to every rank, and the conversation with each runs in a
    thread of its own: a rank may wait in a collective for the others.
    When one rank fails and the others do not answer within PEER_GRACE_S
    (they wait for it in a collective), they are stopped, and the gang with
    them."""

    def __init__(self, world, check=True):
        self.world = world
        self.dir = tempfile.mkdtemp(prefix="kernelbox-ranks-")
        store = os.path.join(self.dir, "store")  # the rendezvous: a file, no port
        first = Pool(check, 0, world, store)
        self.pools = [first] + [Pool(check, r, world, store, loader=first.loader) for r in range(1, world)]
        self.dead = ""

    def ask(self, kind, case):
        if self.dead:
            raise WorkerDied(self.dead)
        n = self.world
        # failures: the ranks whose job ended badly, in the order they did.
        replies, died, failures = [None] * n, [None] * n, []
        failed = threading.Event()

        def one(r):
            try:
                replies[r] = reply = self.pools[r].ask(kind, case)
                if "error" in reply or reply.get("ok") is False:
                    failures.append(r)
                    failed.set()
            except WorkerDied as e:
                died[r] = e
                failures.append(r)
                failed.set()

        threads = [threading.Thread(target=one, args=(r,), name=f"rank{r}", daemon=True) for r in range(n)]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads) and not failed.wait(0.2):
            pass
        deadline = time.monotonic() + PEER_GRACE_S
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        cause = list(failures)  # before the stopped ones join it
        if any(t.is_alive() for t in threads):
            for p in self.pools:
                p.proc.kill()
            for t in threads:
                t.join()
        return self._merge(kind, replies, died, cause)

    def _merge(self, kind, replies, died, cause):
        """One reply for the run: the failure of the first rank that failed
        on its own (its death, or an error that is not a peer's), else rank
        0's reply (its clock times the calls). A death outranks an error
        that came first: a dead peer breaks the others' collectives, and
        they often raise before this process has read its exit status."""
        for e in died:
            if e is not None and e.setup:
                raise e
        cause = sorted(cause, key=lambda r: died[r] is None)
        for r in cause:
            if died[r] is not None:
                self.dead = f"rank {r}: {died[r]}"
                raise WorkerDied(self.dead)
            reply = replies[r]
            if "error" in reply and not reply.get("peer"):
                if any(e is not None for e in died):
                    self.dead = "the ranks were stopped after an earlier failure"
                return dict(reply, error=f"rank {r}: {reply['error']}")
        if kind == "test":
            for r, reply in enumerate(replies):
                if reply and reply.get("ok") is False:
                    return dict(reply, message=f"rank {r}: {reply.get('message', '')}")
        if any(e is not None for e in died):
            r = next(r for r, e in enumerate(died) if e is not None)
            self.dead = f"rank {r}: {died[r]}"
            raise WorkerDied(self.dead)
        for reply in replies:
            if reply and "error" in reply:
                return reply
        return replies[0]

    def close(self):
        for p in self.pools:
            p.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Ranks:
    """A multi-GPU run's cases on CUDA, by the older path: each gets a gang
    of its world_size, started when a case first needs it."""

    def __init__(self, gpus, check=True):
        self.gpus, self.check, self.gang = gpus, check, None

    def ask(self, kind, case):
        world = world_of(case, self.gpus)
        if isinstance(world, str):
            return {"error": world, "bad_case": True}
        if self.gang is None or self.gang.world != world:
            self.close()
            self.gang = Gang(world, self.check)
        return self.gang.ask(kind, case)

    def close(self):
        if self.gang is not None:
            self.gang.close()
            self.gang = None
