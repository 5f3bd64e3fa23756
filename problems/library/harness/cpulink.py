"""The judge's CPU clock (judge.CpuLink): how a call of the worker's
custom_kernel is handed its input and timed on the CPU backend.

The input travels with the call in a memfd the judge has sealed, which
the worker maps read-only; the clock starts just before the call is sent
and stops when the worker's sealed output has arrived. Everything the
worker might do with its input is inside that window.
"""

import os
import time

import wire


class CpuLink:
    """Inputs in sealed memfds the worker maps read-only; outputs in sealed
    memfds of the worker's, read once the reply is here."""

    # Calls are timed one to a window: the round trip is the clock.
    batches = False

    def __init__(self, judge):
        self.j = judge

    def prepare(self):
        pass

    def report(self):
        return {}

    def net(self, times, calls=1):
        """The times with the clock's fixed cost taken off: on the CPU the
        round trip is part of every submission's time alike."""
        return [t / calls for t in times]

    def call(self, data):
        return self.timed([data], False)

    def warm(self, seconds):
        self.j.send({"op": "warm", "seconds": seconds})
        return self.j.recv()

    def timed(self, datas, selftime):
        """One call on datas[0]: on the CPU a window holds one call."""
        (data,) = datas
        j, torch = self.j, self.j.torch
        tensors = []
        tree = wire.flatten(torch, data, tensors)
        metas, size = wire.metas_of(torch, tensors)
        fd = wire.sealed_memfd("kernelbox-input", torch, tensors, metas, size)
        # The input travels with the call, and the clock starts before it
        # is sent: whatever the worker does with an input (map it, or
        # start on it in a hook of its own) is inside the window. Sent
        # ahead, it was work done off the clock (4x on matmul).
        nonce = wire.nonce()
        t0 = time.perf_counter_ns()
        try:
            j.send({"op": "call", "nonce": nonce, "data": tree, "tensors": metas, "size": size}, (fd,))
        finally:
            os.close(fd)
        reply = j.recv(want_fds=True)
        ns = time.perf_counter_ns() - t0
        fds = j.fds
        try:
            if "error" in reply:
                return {"error": str(reply["error"])}
            wire.check_nonce(reply, nonce)
            return {"out": self.output(reply, fds), "ns": float(ns)}
        except wire.BAD_REPLY as e:
            return {"error": f"the submission's process broke the protocol: {type(e).__name__}: {e}"[:2000]}
        finally:
            for f in fds:
                os.close(f)

    def profile(self, data, ncu):
        """Profile mode's one call (worker op profile), its input handed
        over as a call's is and its output read as a call's is, untimed:
        (out, report), or error."""
        j, torch = self.j, self.j.torch
        tensors = []
        tree = wire.flatten(torch, data, tensors)
        metas, size = wire.metas_of(torch, tensors)
        fd = wire.sealed_memfd("kernelbox-input", torch, tensors, metas, size)
        try:
            j.send({"op": "profile", "ncu": ncu, "data": tree, "tensors": metas, "size": size}, (fd,))
        finally:
            os.close(fd)
        reply = j.recv(want_fds=True)
        fds = j.fds
        try:
            if "error" in reply:
                return {"error": str(reply["error"])}
            return {"out": self.output(reply, fds), "report": str(reply.get("report", ""))}
        except wire.BAD_REPLY as e:
            return {"error": f"the submission's process broke the protocol: {type(e).__name__}: {e}"[:2000]}
        finally:
            for f in fds:
                os.close(f)

    def output(self, reply, fds):
        torch = self.j.torch
        metas, size = reply.get("tensors"), reply.get("size")
        if len(fds) != 1 or not wire.is_sealed(fds[0]):
            raise ValueError("its output did not come in one sealed memfd")
        if not wire.is_int(size) or size < 0 or os.fstat(fds[0]).st_size < size:
            raise ValueError("its output's size does not add up")
        why = wire.check_metas(torch, metas, size)
        if why:
            raise ValueError(why)
        if size > wire.extent(metas):
            # Bytes no tensor holds: read, they would be the judge's memory
            # to spend on a sparse memfd's say-so.
            raise ValueError(f"its output's memfd claims {size} bytes, its tensors {wire.extent(metas)}")
        flat = wire.read_memfd(torch, fds[0], size)
        return wire.unflatten(reply.get("out"), wire.views(torch, flat, metas), output=True)
