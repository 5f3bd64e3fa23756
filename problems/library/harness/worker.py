"""The worker: the one process that imports the submission.

    python -c "import worker; worker.main(FD)"

FD is its end of the judge's channel (wire.Channel). The worker maps the
inputs the judge hands it, calls custom_kernel and puts the output where
the judge reads it; nothing it says is believed except a failure. It holds
no expected output, no seed the judge draws, no clock that decides a score
and no way to write the result stream.
"""

import errno
import importlib
import os
import socket
import sys
import time
import traceback

import wire

# How many fresh memfds an output may be written to when sealing one stays
# busy (wire.seal tries each several times): the judge takes an output
# only with F_SEAL_WRITE.
OUTPUT_MEMFDS = 3


def describe(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:]


def load_kernel():
    """The submission's custom_kernel, imported on first use: never before
    the judge's go, and never in the judge's process."""
    importlib.invalidate_caches()  # a standby's run came after it started
    import submission

    fn = getattr(submission, "custom_kernel", None)
    if not callable(fn):
        raise AttributeError("submission.py defines no function custom_kernel(data)")
    return fn


class Refused(Exception):
    """An output the judge cannot take, said without a traceback."""


class Worker:
    def __init__(self, chan):
        import torch

        import kbutils

        self.chan, self.torch = chan, torch
        self.dev = kbutils.device()
        self.kernel = None
        self.data = None  # the last call's input, for warm-up calls
        self.batch = None  # CUDA: the inputs of the next window of calls
        self.inp = None  # CUDA: (ptr, flat tensor) of the judge's input buffer
        self.held = None  # CUDA: the last output, until the judge has read it
        self.spare = None  # CPU: (memfd, size) for the next output
        self.start = self.done = None
        self.self_time = None
        # A KernelBot problem's inputs are the submission's to write (the go).
        # On the CPU a copy-on-write mapping; on CUDA the judge's buffer,
        # which it writes anew before every call.
        self.copy_inputs = False
        if self.dev == "cuda":
            torch.cuda.init()
            torch.empty(1, device="cuda")  # the primary context, current on this thread
            self.drv = wire.Driver()
            self.done = torch.cuda.Event(interprocess=True)
            self.done.record()

    def hello(self):
        msg = {"ready": True, "device": self.dev, "pid": os.getpid()}
        if self.done is not None:
            msg["done"] = bytes(self.done.ipc_handle()).hex()
        return msg

    def load(self):
        if self.kernel is None:
            self.kernel = load_kernel()
        return self.kernel

    def serve(self):
        while True:
            try:
                msg, fds = self.chan.recv()
            except wire.Closed:
                return
            op = msg.get("op")
            if op == "stop":
                return
            try:
                if op in ("buffers", "release"):
                    self.buffers(msg) if op == "buffers" else self.release()
                    reply, out_fds = {"ok": True}, ()
                elif op == "input":
                    reply, out_fds = self.inputs(msg, fds), ()
                elif op == "call":
                    if "tensors" in msg:
                        # The CPU's call brings its input: the worker sees
                        # it only inside the timed window (CpuLink.timed).
                        self.inputs(msg, fds)
                    reply, out_fds = self.call(msg)
                elif op == "warm":
                    reply, out_fds = self.warm(msg), ()
                elif op == "selftime":
                    reply, out_fds = {"ns": self.own_time()}, ()
                elif op == "profile":
                    reply, out_fds = self.profile(msg, fds)
                else:
                    reply, out_fds = {"error": f"the worker does not know op {op!r}"}, ()
            except Refused as e:
                reply, out_fds = {"error": str(e)}, ()
            except BaseException as e:  # noqa: BLE001 - a submission may raise anything
                reply, out_fds = {"error": describe(e)}, ()
            finally:
                for fd in fds:
                    os.close(fd)
            if "nonce" in msg:
                # Echoed: a reply sent ahead of its call cannot know it.
                reply["nonce"] = msg["nonce"]
            self.chan.send(reply, out_fds)
            for fd in out_fds:
                os.close(fd)
            if op == "call" and out_fds:
                self.spare_for(reply.get("size"))

    # ------------------------------------------------------------ inputs

    def buffers(self, msg):
        """The judge's (new) input buffer and its start event."""
        torch = self.torch
        self.release()
        spec = msg["input"]
        ptr = self.drv.open(spec["handle"])
        self.inp = (ptr, wire.device_bytes(torch, ptr, int(spec["size"])))
        self.start = torch.cuda.Event.from_ipc_handle(torch.cuda.current_device(), bytes.fromhex(msg["start"]))

    def release(self):
        """Let go of the judge's input buffer (it is about to free it)."""
        if self.inp is not None:
            self.torch.cuda.synchronize()
            self.data = self.held = None
            self.drv.close(self.inp[0])
            self.inp = None

    def inputs(self, msg, fds):
        """The next call's input: on the CPU a sealed memfd mapped
        read-only, which comes with the call itself; on CUDA views of the
        judge's input buffer, set up before the window (the bytes they
        show are written inside it)."""
        torch = self.torch
        metas, size = msg.get("tensors"), int(msg["size"])
        if self.dev == "cuda":
            flat = self.inp[1]
        else:
            if len(fds) != 1:
                raise RuntimeError("the judge sent no input memfd")
            # A KernelBot problem's submission may write its input: a
            # private copy-on-write mapping, whose pages are copied only as
            # they are written, by the kernel, whoever asks.
            flat = wire.map_memfd(torch, fds[0], size, private=self.copy_inputs)
        if "batch" in msg:
            # One window's inputs, one after another in the buffer.
            self.batch = [wire.unflatten(b["data"], wire.views(torch, flat, b["tensors"])) for b in msg["batch"]]
            self.data = self.batch[0]
        else:
            self.batch = None
            self.data = wire.unflatten(msg["data"], wire.views(torch, flat, metas))
        return {"ok": True}

    # ------------------------------------------------------------- calls

    def call(self, msg):
        torch = self.torch
        kernel = self.load()
        self.held = []  # the judge has read the last outputs
        data = self.data
        if data is None:
            raise RuntimeError("the judge called before it sent an input")
        if self.dev != "cuda":
            return self.ship(kernel(data))
        torch.cuda.current_stream().wait_event(self.start)
        self.self_time = None
        if msg.get("selftime"):
            # Read only when the judge asks (op selftime): waiting for them
            # here would make the reply late.
            self.self_time = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            self.self_time[0].record()
        if msg.get("batch"):
            # Each call's output is kept (place) until the judge has read
            # them all: none of them is handed back before the last call.
            if not self.batch:
                raise RuntimeError("the judge asked for a window of calls before it sent their inputs")
            outs = [kernel(d) for d in self.batch]
            reply = {"outs": [self.place(out) for out in outs]}
            self.done.record()
            return reply, ()
        out = kernel(data)
        if self.self_time:
            self.self_time[1].record()
        reply = self.place(out)
        self.done.record()
        return reply, ()

    def own_time(self):
        """The last call's time by this process's own events (to measure
        the judge's clock against), or None."""
        if not self.self_time:
            return None
        e0, e1 = self.self_time
        e1.synchronize()
        return e0.elapsed_time(e1) * 1e6

    def outputs(self, out):
        """(layout, tensors) of an output, which must be plain tensors in
        tuples or lists."""
        tensors = []
        return layout_of(self.torch, out, tensors), tensors

    def ship(self, out):
        """CPU: the output in a sealed memfd of our own (the spare one made
        after the last call, when it has the right size)."""
        torch = self.torch
        tree, tensors = self.outputs(out)
        metas, size = wire.metas_of(torch, tensors)
        fd, self.spare = self.spare, None
        if fd is None or fd[1] != size:
            if fd is not None:
                os.close(fd[0])
            fd = (wire.new_memfd("kernelbox-output", size), size)
        for attempt in range(OUTPUT_MEMFDS):
            try:
                wire.fill_and_seal(fd[0], torch, tensors, metas, strict=True)
                break
            except OSError as e:
                os.close(fd[0])
                if e.errno != errno.EBUSY or attempt == OUTPUT_MEMFDS - 1:
                    raise
                # A page of it still held (another CPU's LRU batch): the
                # judge takes only a fully sealed output, so a fresh one.
                fd = (wire.new_memfd("kernelbox-output", size), size)
            except BaseException:
                os.close(fd[0])
                raise
        return {"out": tree, "tensors": metas, "size": size}, (fd[0],)

    def spare_for(self, size):
        """A memfd for the next output, its pages allocated while the judge
        checks this one."""
        if isinstance(size, int) and self.spare is None:
            self.spare = (wire.new_memfd("kernelbox-output", size), size)

    def place(self, out):
        """CUDA: where each output tensor lies, for the judge to read it
        there: an IPC handle of its allocation and an offset. A tensor that
        is not contiguous, or lives in memory that cannot be exported (a
        stream-ordered pool, say), is first copied into memory that can
        (torch's caching allocator), before the done event."""
        torch, drv = self.torch, self.drv
        tree, tensors = self.outputs(out)
        held, where = [], []
        for i, t in enumerate(tensors):
            if t.device.type != "cuda":
                raise Refused(f"custom_kernel returned a tensor on {t.device}; the output must be on cuda")
            if not t.is_contiguous():
                t = tensors[i] = t.contiguous()
            at = self.locate(t)
            if at is None:
                t = tensors[i] = t.clone()
                at = self.locate(t)
                if at is None:
                    raise RuntimeError("the output lives in memory the judge cannot open (cuIpcGetMemHandle failed)")
            held.append(t)
            where.append(at)
        self.held.append((out, held))  # alive until the judge has read them
        metas, size = wire.metas_of(torch, tensors)
        return {"out": tree, "tensors": metas, "at": where, "size": size}

    def locate(self, t):
        if t.numel() == 0:
            return {"handle": "", "offset": 0}
        try:
            base, _ = self.drv.range(t.data_ptr())
            return {"handle": self.drv.export(base), "offset": t.data_ptr() - base}
        except RuntimeError:
            return None

    def warm(self, msg):
        """Untimed calls on the last input: JIT compilation and caches."""
        kernel, torch = self.load(), self.torch
        t_end = time.perf_counter() + float(msg.get("seconds", 0.05))
        for _ in range(int(msg.get("calls", 100))):
            kernel(self.data)
            if self.dev == "cuda":
                torch.cuda.synchronize()
            if time.perf_counter() > t_end:
                break
        return {"ok": True}


    # ----------------------------------------------------------- profile

    def profile(self, msg, fds):
        """Profile mode: the input comes with the message; one untimed
        call compiles and warms up, then one call runs inside the NVTX
        range custom_kernel, under torch.profiler, or with msg["ncu"] under
        nothing of ours: the runner's ncu --nvtx-include custom_kernel/
        profiles the kernels launched in that range, which only this
        process opens. The report is text for the contestant, believed by
        nothing; the profiled call's output goes back as a call's does,
        for the judge's verdict."""
        torch = self.torch
        kernel = self.load()
        self.inputs(msg, fds)
        cuda = self.dev == "cuda"
        data = self.data
        kernel(data)
        if cuda:
            torch.cuda.synchronize()
        self.held = []
        if msg.get("ncu"):
            out = self.ranged(kernel, data)
            report = "profiled by ncu (NVTX range custom_kernel); its summary follows the benchmarks"
        else:
            acts = [torch.profiler.ProfilerActivity.CPU]
            sort = "self_cpu_time_total"
            if cuda:
                acts.append(torch.profiler.ProfilerActivity.CUDA)
                sort = "self_cuda_time_total"
            with torch.profiler.profile(activities=acts) as prof:
                out = self.ranged(kernel, data)
            report = prof.key_averages().table(sort_by=sort, row_limit=PROFILE_ROWS)
        if not cuda:
            reply, out_fds = self.ship(out)
        else:
            reply, out_fds = self.place(out), ()
            self.done.record()
        reply["report"] = report[:MAX_REPORT]
        return reply, out_fds

    def ranged(self, kernel, data):
        """One call inside the NVTX range custom_kernel, finished before
        the range closes, so the range holds all of its kernels."""
        torch = self.torch
        if self.dev != "cuda":
            return kernel(data)
        torch.cuda.nvtx.range_push("custom_kernel")
        try:
            out = kernel(data)
            torch.cuda.synchronize()
        finally:
            torch.cuda.nvtx.range_pop()
        return out


# Profile mode's table: its first rows, and at most this many characters
# (the channel's messages are small; the table's head is what is read).
PROFILE_ROWS = 20
MAX_REPORT = 64 << 10


def layout_of(torch, x, tensors):
    """An output's layout, its tensors appended to tensors. A function of
    the module, not a closure in outputs(): a recursive closure is a
    reference cycle (the function and its cell), which kept every call's
    tensors, and so its output, alive until the cyclic collector ran, a
    GiB a call on large shapes (CUDA out of memory on an 80 GB H100)."""
    if type(x) is torch.Tensor and x.device.type != "meta":
        tensors.append(x)
        return {"t": len(tensors) - 1}
    if isinstance(x, (tuple, list)):
        return {type(x).__name__: [layout_of(torch, y, tensors) for y in x]}
    if type(x) is torch.Tensor:
        raise Refused("the output has no storage (a meta tensor)")
    if isinstance(x, torch.Tensor):
        raise Refused(f"the output is a {type(x).__name__}, a subclass of torch.Tensor: expected a plain torch.Tensor")
    raise Refused(f"the output holds a {type(x).__name__}: it must be plain tensors (in a tuple or list)")


def null_kernel(torch, out):
    """The null worker's custom_kernel: one near-empty kernel on the
    caller's stream (any real call launches at least one), then out."""
    sleep = getattr(torch.cuda, "_sleep", None) if out.device.type == "cuda" else None

    def kernel(data):
        if sleep is not None:
            sleep(1)
        return out

    return kernel


def join_ranks(torch, rank, world, store):
    """One rank of a multi-GPU problem: this process joins the others (a
    file rendezvous of the judge's, no port) before the submission loads,
    so custom_kernel finds torch.distributed ready, as on KernelBot."""
    import datetime

    import torch.distributed as dist

    import kbutils
    import ranklink

    if kbutils.device() == "cuda":
        torch.cuda.set_device(rank)
        backend = "nccl"
    else:
        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // world))
        backend = "gloo"
    dist.init_process_group(backend, init_method="file://" + store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=ranklink.RANK_TIMEOUT_S))


def main(fd: int, null: bool = False, preload: bool = False, rank=None, world=None, store=None):
    """Serve the judge on fd. A null worker never imports the submission:
    its kernel returns a tensor it made at start, so the judge can measure
    what its clock costs with no work in it. With world, it is one rank of
    a multi-GPU problem's."""
    chan = wire.Channel(socket.socket(fileno=fd))
    wire.sample_stacks("null" if null else "worker")
    try:
        # torch loads while the device may still be another run's; the
        # device is touched (Worker) only once the judge says go.
        import torch

        if preload and not null:
            try:
                import triton  # noqa: F401 - imports, touches no device
            except ImportError:
                pass
        try:
            msg, fds = chan.recv()
        except wire.Closed:
            return
        for f in fds:
            os.close(f)
        if msg.get("op") != "go":
            raise RuntimeError(f"the judge's first message is {msg.get('op')!r}, not go")
        if world is not None:
            join_ranks(torch, rank, world, store)
        w = Worker(chan)
        w.copy_inputs = bool(msg.get("copy_inputs"))
        if null:
            out = w.torch.zeros(64, device=w.dev)
            w.kernel = null_kernel(w.torch, out)
    except BaseException as e:  # noqa: BLE001 - everything is reported
        chan.send({"fatal": "harness set-up failed: " + describe(e)})
        return
    chan.send(w.hello())
    w.serve()
    # The judge is waiting for this process to end; tearing down torch's
    # state first (its device context, the judge's memory opened here)
    # would only delay the result.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
