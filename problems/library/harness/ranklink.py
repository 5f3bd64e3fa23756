"""The judge's link to a multi-GPU problem's ranks (judge.RankLink): one
worker a rank, joined by torch.distributed, each importing the
submission; the judge keeps every other part of the run, as for one
device.

The judge draws every rank's input of a call from one seed of its own
(generate_input(**case, rank=r)), computes every rank's expected output
with the reference in its own process (the reference takes all the
ranks' inputs and returns all their outputs), hands each rank its input
with the call, and times the call from just before the first is sent to
the last rank's sealed output. Each output is checked against its rank's.

Only the CPU backend (gloo) is timed here. On CUDA the ranks still run
eval.py's older path until the judge's clock spans several devices
(docs/integrity.md).
"""

import os
import selectors
import tempfile
import time

import wire
from cpulink import CpuLink
from wire import WorkerDied

# How long a collective may wait for a rank before the process group
# gives up, and how long the judge waits for the other ranks once one has
# failed (they may wait in a collective for it) before it stops them all.
RANK_TIMEOUT_S = 300
PEER_GRACE_S = 10.0
# What every rank's environment holds. NVLink multicast off: a program that
# uses it can put a shared host's GPUs out of service; the transports stay
# on loopback, the only interface of a run's network namespace.
RANK_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
            "GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}
# Untimed calls before a benchmark: a fixed count, the same on every rank,
# since each call is a collective every rank must join.
WARM_CALLS = 3


def rank_inputs(ref, case):
    """Every rank's input of a multi-GPU case: generate_input(**case, rank=r)."""
    return [ref.generate_input(**case, rank=r) for r in range(int(case["world_size"]))]


def ranks_expected(kb, ref, datas):
    """A multi-GPU problem's expected outputs, one a rank. Its reference
    runs in one process, without collectives: it takes every rank's input
    and returns every rank's output, so the judge can compute it."""
    fn = getattr(ref.check_implementation, "expected", None)
    if fn is None:
        raise RuntimeError("a multi-GPU problem's check_implementation must come from kbutils.make_checker or match_reference")
    with kb.deterministic():
        out = fn([kb.clone_data(d) for d in datas])
    if not isinstance(out, (list, tuple)) or len(out) != len(datas):
        raise RuntimeError(f"a multi-GPU reference returns one output per rank ({len(datas)}), not {type(out).__name__}")
    return out


def world_of(case, gpus):
    """A case's world_size, or a string saying why it cannot run."""
    world = case.get("world_size")
    if not isinstance(world, int) or isinstance(world, bool) or world < 1:
        return f"a multi-GPU case needs a positive integer world_size, not {world!r}"
    if world > gpus:
        return f"the case needs world_size {world} and the run has {gpus} GPUs (POPCORN_GPUS)"
    return world


class Rendezvous:
    """The ranks' meeting point: a file in a directory of the judge's."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="kernelbox-ranks-")
        self.store = os.path.join(self.dir, "store")

    def close(self):
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)


class RankLink(CpuLink):
    """CpuLink's hand-over and clock, to every rank at once: each rank's
    input in a sealed memfd it maps read-only, sent with the call; each
    rank's output in a sealed memfd of its own. The time runs from the
    first send to the last output received: the ranks' round trips count
    alike for every submission of a case."""

    def __init__(self, judge, peers):
        super().__init__(judge)
        self.peers = peers

    def warm(self, seconds):
        """Untimed calls on every rank's last input, WARM_CALLS each."""
        for p in self.peers:
            p.send({"op": "warm", "seconds": 1e9, "calls": WARM_CALLS})
        replies = self.gather()
        for r, (reply, _) in enumerate(replies):
            if "error" in reply:
                return {"error": f"rank {r}: {reply['error']}"}
        return {"ok": True}

    def timed(self, datas, selftime):
        """One call on every rank; datas[0] holds every rank's input."""
        (ranks,) = datas
        torch = self.j.torch
        sends, nonce = [], wire.nonce()
        try:
            for data in ranks:
                tensors = []
                tree = wire.flatten(torch, data, tensors)
                metas, size = wire.metas_of(torch, tensors)
                sends.append(({"op": "call", "nonce": nonce, "data": tree, "tensors": metas, "size": size},
                              wire.sealed_memfd("kernelbox-input", torch, tensors, metas, size)))
            t0 = time.perf_counter_ns()
            for p, (msg, fd) in zip(self.peers, sends):
                p.send(msg, (fd,))
        finally:
            for _, fd in sends:
                os.close(fd)
        replies = self.gather()
        ns = time.perf_counter_ns() - t0
        outs, err = [], ""
        for r, (reply, fds) in enumerate(replies):
            try:
                if not err and "error" in reply:
                    err = f"rank {r}: {reply['error']}"
                elif not err:
                    wire.check_nonce(reply, nonce)
                    outs.append(self.output(reply, fds))
            except wire.BAD_REPLY as e:
                err = f"rank {r}: the submission's process broke the protocol: {type(e).__name__}: {e}"[:2000]
            finally:
                for f in fds:
                    os.close(f)
        if err:
            return {"error": err}
        return {"out": outs, "ns": float(ns)}

    def gather(self):
        """Every rank's reply to the message just sent: [(reply, fds)]. When
        one rank fails, the others get PEER_GRACE_S to answer (they may
        wait in a collective for it); then every rank is stopped and the
        gang is dead, its cause the first rank that failed on its own."""
        got = [None] * len(self.peers)
        sel = selectors.DefaultSelector()
        for r, p in enumerate(self.peers):
            sel.register(p.chan.fileno(), selectors.EVENT_READ, r)
        deadline, failed = None, None
        try:
            while any(g is None for g in got):
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                events = sel.select(timeout)
                if not events:
                    break  # the grace ran out
                for key, _ in events:
                    r = key.data
                    sel.unregister(key.fd)
                    try:
                        msg = self.peers[r].recv(want_fds=True)
                        got[r] = (msg, self.peers[r].fds)
                        if "error" in msg and failed is None:
                            failed = r
                    except WorkerDied as e:
                        got[r] = e
                        if failed is None:
                            failed = r
                    if failed is not None and deadline is None:
                        deadline = time.monotonic() + PEER_GRACE_S
        finally:
            sel.close()
        dead = next((r for r, g in enumerate(got) if isinstance(g, WorkerDied)), None)
        stuck = [r for r, g in enumerate(got) if g is None]
        if stuck or dead is not None:
            for p in self.peers:
                p.proc.kill()
            for r, g in enumerate(got):
                if isinstance(g, tuple):
                    for f in g[1]:
                        os.close(f)
            first = failed if failed is not None else dead
            g = got[first] if first is not None else None
            if isinstance(g, WorkerDied):
                why = f"rank {first}: {g}"
            elif g is not None:
                why = f"rank {first}: {g[0]['error']}"
            else:
                why = f"ranks {stuck} did not answer"
            for p in self.peers:
                p.dead = p.dead or why
            raise WorkerDied(why)
        return got
