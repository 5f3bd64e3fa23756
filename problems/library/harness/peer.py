"""A worker process as the judge holds it: the process, the judge's end
of its channel, and what its death means (judge.Peer)."""

import os
import signal
import subprocess
import sys

import ranklink
import wire
from wire import SAFE_PATH, WorkerDied


def death(code) -> str:
    if code is not None and code < 0:
        how = f"was killed by {signal.Signals(-code).name}"
        if -code == signal.SIGSEGV:
            how += " (if custom_kernel wrote to its inputs: on the CPU the inputs are read-only)"
        return f"the submission's process {how}"
    return f"the submission's process exited with status {code}"


class Peer:
    """A worker process and the judge's end of its channel."""

    def __init__(self, null=False, preload=False, rank=None, world=None, store=None):
        mine, theirs = wire.Channel.pair()
        fd = theirs.fileno()
        code = (SAFE_PATH if null else "") + f"import worker; worker.main({fd}, null={null!r}, preload={preload!r}, rank={rank!r}, world={world!r}, store={store!r})"
        env = None if world is None else dict(os.environ, **ranklink.RANK_ENV)
        self.proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=(fd,), close_fds=True, env=env)
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
