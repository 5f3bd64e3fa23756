"""The judge's CUDA clock (judge.CudaLink): how a call of the worker's
custom_kernel is timed from the judge's process.

Ta and the start event S are recorded after a head start (a sleep
kernel), the input's copy and the L2 flush; the worker's stream waits for
S, calls custom_kernel and records its done event D; the judge then
queues a wait for D, Tb and the capture of the output while the GPU is
still in the head start, so Tb marks the moment the worker's last work on
its stream ended, and the capture happens before the worker can know
whether it will be checked.

A call whose reply came after Ta had run (the host was late, or
custom_kernel waited for the GPU, which waits for S) keeps its time,
which holds the wait and so only ever grows: it is never timed again on
the same input (a submission late on purpose once replayed its first
answer to a retry, 0.58x). The head start doubles, and comes back down
once replies are quick again; the report counts the late calls.

Ta to Tb also holds a fixed cost, two switches between the processes'
contexts (~290-350 us on H100 and H200). A null worker of ours (no
submission in it, its own start event) is timed the same way before the
submission is imported, and the trimmed mean of those times is taken off
every time; it is timed again once the worker is gone, and a drift
between the two is flagged (Judge.close). Null calls interleaved with the
submission's, as before, could be slowed by work the submission left on
the GPU, which made every net time smaller (0.78x).
"""

import ctypes
import math
import time

import wire
from wire import WorkerDied

# CUDA: the first head start and the longest.
HEAD_START_NS = 500_000
HEAD_START_MAX_NS = 20_000_000
# A reply this many times quicker than the head start halves it.
HEAD_START_SLACK = 4
# Null calls before the submission is imported (the offset) and after its
# worker is gone (the recheck).
CALIBRATION_CALLS = 31
# The share of null times cut from each end before their mean is taken:
# a rare hiccup of the host must not move the offset.
TRIM = 0.1
# How many of the worker's memory segments the judge keeps open between
# windows (a window of calls may open more): opening one is slow enough
# to make a reply late.
OPEN_SEGMENTS = 128
CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1


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


class CudaLink:
    """Inputs in device memory this process allocates with the driver (not
    torch's allocator, whose segments would expose what else they hold);
    outputs read from the worker's own memory, opened here by IPC handle."""

    # Several calls to a window when calls are short (Judge.batched).
    batches = True

    def __init__(self, judge, hello, null):
        self.j = judge
        torch = self.torch = judge.torch
        self.drv = wire.Driver()
        torch.empty(1, device="cuda")
        judge.peer.done = self.event_of(hello)
        # Each worker its own start event: the submission's could record
        # a shared one and move the null worker's start.
        self.start = torch.cuda.Event(interprocess=True)
        self.start_handle = bytes(self.start.ipc_handle()).hex()
        self.null_start = torch.cuda.Event(interprocess=True)
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
        self.late = self.calls = 0  # this benchmark's late calls, of its timed ones
        self.nulls = []  # the null times before the submission was imported
        self.off = 0.0  # their trimmed mean, the offset taken off every time
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
            start = bytes(self.null_start.ipc_handle()).hex()
            for msg in ({"op": "buffers", "input": {"handle": self.drv.export(ptr), "size": 1 << 12}, "start": start},
                        {"op": "input", "data": {"t": 0}, "tensors": [{"dtype": "uint8", "shape": [256], "offset": 0, "nbytes": 256}], "size": 256}):
                null.send(msg)
                reply = null.recv()
                if "error" in reply:
                    raise WorkerDied(str(reply["error"])[-300:])
            null.private = torch.zeros(256, dtype=torch.uint8, device="cuda")
            self.null = null
            self.nulls = self.null_times()
            self.off = trimmed_mean(self.nulls)
            n, times = len(self.nulls), self.nulls
            self.null_status = f"ok: at start median {times[n // 2]:.0f} ns, p10 {times[n // 10]:.0f}, p90 {times[(9 * n) // 10]:.0f}"
        except WorkerDied as e:
            self.null_status = f"off: {e}"
            self.null = None
            null.close()

    def null_times(self):
        """CALIBRATION_CALLS null calls' times, sorted; the box's failure
        when too many of them came late."""
        times = []
        for _ in range(3 * CALIBRATION_CALLS):
            t = self.null_time()
            if t is not None:
                times.append(t)
            if len(times) == CALIBRATION_CALLS:
                break
        if len(times) < CALIBRATION_CALLS // 2:
            raise WorkerDied("the null worker's replies kept coming late", setup=True)
        return sorted(times)

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
        return r["ns"]

    def offset(self):
        """The clock's fixed cost: the trimmed mean of the null times taken
        before the submission was imported (worked out once, in
        start_null), and their count."""
        return self.off, len(self.nulls)

    def recheck(self):
        """The null times again, once the submission's worker is gone:
        (the offset now, "" or why it could not be measured). With the
        head start of the start-up calibration: a submission's late calls
        may have left it at 20 ms."""
        if self.null is None:
            return None, "off: no null worker"
        self.head_ns = HEAD_START_NS
        try:
            return trimmed_mean(self.null_times()), ""
        except WorkerDied as e:
            return None, str(e)

    def net(self, times, calls=1):
        """Each window's time less the clock's cost, per call in it. Never
        clamped: a net time at or below zero is the judge's to flag."""
        off, _ = self.offset()
        return [(t - off) / calls for t in times]

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
        self.late = self.calls = 0

    def report(self):
        off, n = self.offset()
        return {"late": self.late, "calls": self.calls, "head_start_ns": self.head_ns, "l2_reset": self.l2_status or "ok",
                "segments": len(self.segments), "offset": f"{self.null_status}; {off:.0f} ns taken off, the trimmed mean of {n} null calls"}

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
        return self.timed([data], False, counts=False)

    def warm(self, seconds):
        self.j.send({"op": "warm", "seconds": seconds})
        return self.j.recv()

    def lay_out(self, datas):
        """Each input's layout in the shared buffer, one after another:
        ([{data, tensors}], [(tensor, meta)], bytes)."""
        torch = self.torch
        parts, placed, base = [], [], 0
        for data in datas:
            tensors = []
            tree = wire.flatten(torch, data, tensors)
            metas, size = wire.metas_of(torch, tensors)
            for m in metas:
                m["offset"] += base
            parts.append({"data": tree, "tensors": metas})
            placed += zip(tensors, metas)
            base = wire.aligned(base + size)
        return parts, placed, base

    def stage(self, datas):
        """datas laid out one after another in the shared buffer (announced
        to the worker), and the judge's private copy of their bytes, from
        which the buffer is written before each call: (parts, size,
        private), or why the worker could not open the buffer."""
        torch = self.torch
        parts, placed, size = self.lay_out(datas)
        why = self.ensure(size)
        if why:
            return why
        private = torch.zeros(max(size, 1), dtype=torch.uint8, device="cuda")
        for t, m in placed:
            if m["nbytes"]:
                private[m["offset"]:m["offset"] + m["nbytes"]].copy_(wire.raw_bytes(torch, t.to("cuda")))
        return parts, size, private

    def timed(self, datas, selftime, counts=True):
        """The submission called once on each of datas, one after another
        in one window, timed (gross: net() takes the clock's cost off).
        counts: the time is a benchmark's (late calls are counted).
        r["outs"] holds each call's output as captured at Tb."""
        torch = self.torch
        if counts and self.null is None:
            # The box's failure, never the submission's: no made-up time.
            raise WorkerDied(f"the judge cannot time calls on this GPU: its null worker is {self.null_status}", setup=True)
        staged = self.stage(datas)
        if isinstance(staged, str):
            return {"error": f"the worker could not open the input: {staged}"}
        parts, size, private = staged
        j = self.j
        if len(parts) == 1:
            j.send({"op": "input", "data": parts[0]["data"], "tensors": parts[0]["tensors"], "size": size})
        else:
            j.send({"op": "input", "batch": parts, "size": size})
        reply = j.recv()
        if "error" in reply:
            return {"error": str(reply["error"])}
        msg = {"op": "call", "selftime": selftime and len(parts) == 1, "batch": len(parts) > 1}
        r = self.once(msg, private, size, j.peer, self.inp[1], len(parts))
        if "error" in r:
            return r
        if r.pop("late"):
            # Its time holds the wait and stands; the next call gets a
            # longer head start.
            self.head_ns = min(2 * self.head_ns, HEAD_START_MAX_NS)
            self.late += counts
        self.calls += counts
        if not self.j.copy_inputs and not torch.equal(self.inp[1][:size], private[:size]):
            # A KernelBot problem's submission may write its input (an
            # output buffer among them): the buffer is the judge's, written
            # anew from its own copy before every call.
            r["misuse"] = "custom_kernel modified its input; inputs must be left as they were"
        return r

    def once(self, msg, private, size, peer, inp, calls=1):
        """One window of calls: its gross time, each call's output as
        captured at Tb, and whether the reply came too late for Tb to be
        queued in the head start."""
        torch = self.torch
        if len(self.segments) >= OPEN_SEGMENTS:
            # Never during a window: its outputs' views would be closed.
            self.forget_segments()
        torch.cuda.synchronize()
        self.reset_l2()
        cycles = int(self.cycles_per_ns * self.head_ns)
        if cycles > 0:
            self.sleep(cycles)
        inp[:size].copy_(private[:size])
        self.flush_buf.zero_()
        self.ta.record()
        (self.start if peer is self.j.peer else self.null_start).record()
        sent = time.perf_counter_ns()
        peer.send(msg)
        reply = peer.recv()
        host_ns = time.perf_counter_ns() - sent
        if "error" in reply:
            torch.cuda.synchronize()
            return {"error": str(reply["error"])}
        replies = reply.get("outs") if msg.get("batch") else [reply]
        try:
            if not isinstance(replies, list) or len(replies) != calls or not all(isinstance(x, dict) for x in replies):
                raise ValueError(f"it answered {calls} calls with no list of {calls} outputs")
            srcs = [self.sources(x) for x in replies]
        except (RuntimeError, *wire.BAD_REPLY) as e:
            torch.cuda.synchronize()
            return {"error": f"the submission's process broke the protocol: {e}"}
        torch.cuda.current_stream().wait_event(peer.done)
        self.tb.record()
        caps = [[s.clone() for s in call] for call in srcs]
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
        r = {"ns": ns, "late": late, "outs": []}
        try:
            for call, cap, x in zip(srcs, caps, replies):
                if not all(torch.equal(c, s) for c, s in zip(cap, call)):
                    r["misuse"] = "the output changed after custom_kernel's stream said it was done"
                r["outs"].append(wire.unflatten(x.get("out"), output=True, tensors=[c.view(getattr(torch, m["dtype"])).reshape(m["shape"]) if m["nbytes"] else
                                                               torch.empty(m["shape"], dtype=getattr(torch, m["dtype"]), device="cuda")
                                                               for c, m in zip(cap, x["tensors"])]))
        except wire.BAD_REPLY as e:
            return {"error": f"the submission's process broke the protocol: {e}"}
        r["out"] = r["outs"][0]
        if msg.get("selftime"):
            peer.send({"op": "selftime"})
            own = peer.recv().get("ns")
            if isinstance(own, (int, float)) and not isinstance(own, bool) and math.isfinite(own):
                r["own"] = own
        return r

    def profile(self, data, ncu):
        """Profile mode's one call (worker op profile), untimed: its input
        copied into the shared buffer as a timed call's is, its output
        read from the worker's memory once its done event has passed:
        (out, report, misuse), or error. Every kernel of this process's
        (the copy, the check) runs outside the NVTX range the worker
        opens, in another process, so ncu never profiles the judge."""
        torch, j = self.torch, self.j
        staged = self.stage([data])
        if isinstance(staged, str):
            return {"error": f"the worker could not open the input: {staged}"}
        parts, size, private = staged
        self.inp[1][:size].copy_(private[:size])
        # The worker's calls do not wait for the start event here: the
        # input is in place before the message goes.
        torch.cuda.synchronize()
        j.send({"op": "profile", "ncu": ncu, "data": parts[0]["data"], "tensors": parts[0]["tensors"], "size": size})
        reply = j.recv()
        if "error" in reply:
            torch.cuda.synchronize()
            return {"error": str(reply["error"])}
        try:
            srcs = self.sources(reply)
        except (RuntimeError, *wire.BAD_REPLY) as e:
            torch.cuda.synchronize()
            return {"error": f"the submission's process broke the protocol: {e}"}
        torch.cuda.current_stream().wait_event(j.peer.done)
        cap = [s.clone() for s in srcs]
        torch.cuda.synchronize()
        try:
            out = wire.unflatten(reply.get("out"), [c.view(getattr(torch, m["dtype"])).reshape(m["shape"]) if m["nbytes"] else
                                                    torch.empty(m["shape"], dtype=getattr(torch, m["dtype"]), device="cuda")
                                                    for c, m in zip(cap, reply["tensors"])], output=True)
        except wire.BAD_REPLY as e:
            return {"error": f"the submission's process broke the protocol: its output's layout: {e}"}
        r = {"out": out, "report": str(reply.get("report", ""))}
        if not self.j.copy_inputs and not torch.equal(self.inp[1][:size], private[:size]):
            r["misuse"] = "custom_kernel modified its input; inputs must be left as they were"
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
            ptr = self.drv.open(handle)
            seg = self.segments[handle] = (ptr, self.drv.extent(ptr))
        return seg


def trimmed_mean(times):
    """The mean of times with TRIM of them cut from each end: a rare
    hiccup of the host must not move the offset."""
    times = sorted(times)
    cut = int(len(times) * TRIM)
    kept = times[cut:len(times) - cut] or times
    return sum(kept) / len(kept) if kept else 0.0
