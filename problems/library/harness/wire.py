"""What the judge and the worker share: their channel, the layout of the
data handed between them, and the memory it lives in.

The channel is an AF_UNIX SOCK_SEQPACKET socketpair: one JSON object a
message (never pickle: the judge must not unpickle what a process running
user code wrote), with file descriptors passed beside it (SCM_RIGHTS).

Tensors never travel in a message. On the CPU they are bytes in a memfd
that its writer seals before sending it (no more writes, no growing, no
shrinking), so what the reader maps cannot change under it. On CUDA they
live in device memory the judge allocates with the driver and exports to
the worker (cuIpcGetMemHandle): the judge reads outputs there itself.
"""

import ctypes
import errno
import fcntl
import json
import mmap
import os
import socket
import time

# What a worker's `python -c` runs first: its working directory (the run
# directory, which a submission's files may fill with modules named like
# the standard library's) goes last on sys.path. The null worker above
# all must import the real ones: its times are the clock's offset.
SAFE_PATH = "import sys; sys.path.append(sys.path.pop(0)); "
# The largest message; layouts are small, tensors never travel inline.
MAX_MESSAGE = 1 << 20
# The most bytes one hand-over (an input or an output) may take.
MAX_BYTES = 64 << 30
ALIGN = 256
MAX_DIMS = 64
SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
# Linux 5.1's F_SEAL_FUTURE_WRITE (Python names it from 3.9 on some builds).
F_SEAL_FUTURE_WRITE = getattr(fcntl, "F_SEAL_FUTURE_WRITE", 0x0010)
FUTURE_SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | F_SEAL_FUTURE_WRITE
SEAL_TRIES = 5
DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
          "complex64", "complex128")


def sample_stacks(role: str):
    """Diagnostics for whoever tunes the harness: with
    KERNELBOX_HARNESS_STACKS=DIR, this process writes every thread's
    Python stack to DIR/ROLE-PID.txt five times a second (faulthandler,
    so a stack caught inside C code still names the call that entered
    it). Unset, it does nothing."""
    where = os.environ.get("KERNELBOX_HARNESS_STACKS")
    if not where:
        return
    import faulthandler

    f = open(os.path.join(where, f"{role}-{os.getpid()}.txt"), "w")
    faulthandler.dump_traceback_later(0.2, repeat=True, file=f)


class WorkerDied(Exception):
    """The worker died or broke its side; raised by the judge's end."""

    def __init__(self, message, setup=False):
        super().__init__(message)
        self.setup = setup  # the harness's own set-up failed, not user code


# What reading a worker's reply can raise when the reply is malformed:
# the submission breaking the protocol, never the judge failing.
BAD_REPLY = (ValueError, TypeError, KeyError, IndexError, RecursionError, OverflowError, MemoryError)


def nonce():
    """A call's token, which its reply must echo (check_nonce): on the
    CPU the reply's arrival is the clock, and one sent ahead of its call
    would stop it early."""
    return int.from_bytes(os.urandom(8), "little")


def check_nonce(reply, sent):
    if reply.get("nonce") != sent:
        raise ValueError("its reply does not answer this call (a reply sent ahead of its call?)")


class Closed(Exception):
    """The other side closed the channel (or broke the protocol)."""


class Channel:
    def __init__(self, sock: socket.socket):
        self.sock = sock

    @staticmethod
    def pair():
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        return Channel(a), Channel(b)

    def send(self, obj, fds=()):
        data = json.dumps(obj).encode()
        if len(data) > MAX_MESSAGE:
            raise ValueError(f"a message of {len(data)} bytes is over the channel's {MAX_MESSAGE}")
        try:
            socket.send_fds(self.sock, [data], list(fds))
        except (BrokenPipeError, ConnectionResetError) as e:
            raise Closed(str(e)) from e

    def recv(self, maxfds=4):
        """(the message, the descriptors that came with it)."""
        try:
            data, fds, flags, _ = socket.recv_fds(self.sock, MAX_MESSAGE, maxfds)
        except ConnectionResetError as e:
            raise Closed(str(e)) from e
        if not data:
            for fd in fds:
                os.close(fd)
            raise Closed("the other side closed the channel")
        if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            for fd in fds:
                os.close(fd)
            raise Closed("a message was cut short")
        try:
            obj = json.loads(data)
        except (ValueError, RecursionError) as e:
            for fd in fds:
                os.close(fd)
            raise Closed("a message is not JSON") from e
        if not isinstance(obj, dict):
            for fd in fds:
                os.close(fd)
            raise Closed("a message is not an object")
        return obj, fds

    def fileno(self):
        return self.sock.fileno()

    def close(self):
        self.sock.close()


# ------------------------------------------------------------------ layouts


def flatten(torch, data, tensors):
    """A JSON tree for data with each tensor replaced by its index in
    tensors (appended to), so that the tree travels in a message and the
    tensors in shared memory."""
    if isinstance(data, torch.Tensor):
        tensors.append(data)
        return {"t": len(tensors) - 1}
    if isinstance(data, (tuple, list)):
        return {type(data).__name__: [flatten(torch, x, tensors) for x in data]}
    if isinstance(data, dict):
        if not all(isinstance(k, str) for k in data):
            raise TypeError("a dict in the input has keys that are not strings")
        return {"dict": [[k, flatten(torch, v, tensors)] for k, v in data.items()]}
    if data is None or isinstance(data, (bool, int, float, str)):
        return {"v": data}
    raise TypeError(f"the input holds a {type(data).__name__}, which the judge cannot hand over")


# What an output may hold: tensors in tuples and lists (worker.layout_of),
# never a value or a dict that a KernelBot-style check would take unvetted.
OUTPUT_KINDS = ("t", "tuple", "list")


def unflatten(tree, tensors, output=False):
    """data back from a flatten() tree and its tensors; an output's tree
    (output) holds only OUTPUT_KINDS. The tree may come from the worker:
    whatever is wrong with it is a ValueError, which the judge reports as
    the submission breaking the protocol (never as its own failure)."""
    try:
        return _unflatten(tree, tensors, OUTPUT_KINDS if output else None)
    except (TypeError, KeyError, IndexError, RecursionError) as e:
        raise ValueError(f"a layout does not add up: {type(e).__name__}: {e}") from None


def _unflatten(tree, tensors, kinds=None):
    if not isinstance(tree, dict) or len(tree) != 1:
        raise ValueError("a layout node is not a one-key object")
    (kind, v), = tree.items()
    if kinds is not None and kind not in kinds:
        raise ValueError(f"an output holds a {kind!r} node: it must be plain tensors in tuples or lists")
    if kind == "t":
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < len(tensors):
            raise ValueError(f"a layout names tensor {v!r} of {len(tensors)}")
        return tensors[v]
    if kind == "tuple":
        return tuple(_unflatten(x, tensors, kinds) for x in v)
    if kind == "list":
        return [_unflatten(x, tensors, kinds) for x in v]
    if kind == "dict":
        return {k: _unflatten(x, tensors, kinds) for k, x in v}
    if kind == "v":
        return v
    raise ValueError(f"a layout node of kind {kind!r}")


def aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def metas_of(torch, tensors):
    """[{dtype, shape, offset, nbytes}] of tensors packed one after another,
    and the bytes they take."""
    metas, off = [], 0
    for t in tensors:
        n = t.numel() * t.element_size()
        metas.append({"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "offset": off, "nbytes": n})
        off = aligned(off + n)
    return metas, off


def check_metas(torch, metas, size):
    """Why metas do not describe tensors inside size bytes, or ""."""
    if not isinstance(metas, list):
        return "the layout's tensors are not a list"
    for m in metas:
        if not isinstance(m, dict):
            return "a tensor's layout is not an object"
        dtype, shape, off, n = m.get("dtype"), m.get("shape"), m.get("offset"), m.get("nbytes")
        if dtype not in DTYPES or not isinstance(shape, list) or len(shape) > MAX_DIMS or \
                not all(is_int(d) and 0 <= d <= MAX_BYTES for d in shape):
            return f"a tensor is described as dtype {dtype!r} and shape {str(shape)[:80]}"
        want = element_count(shape) * torch.empty((), dtype=getattr(torch, dtype)).element_size()
        if not is_int(off) or not is_int(n) or off < 0 or n != want or off + n > min(size, MAX_BYTES):
            return "a tensor's sizes do not add up"
    return ""


def extent(metas):
    """The bytes the tensors of metas (checked) take, aligned."""
    return max((aligned(m["offset"] + m["nbytes"]) for m in metas), default=0)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def element_count(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def raw_bytes(torch, t):
    """A tensor's bytes as a flat uint8 tensor (a view where it can be)."""
    t = t.detach().contiguous().reshape(-1)
    if t.dtype == torch.bool:
        return t.view(torch.uint8)
    return t.view(torch.uint8) if t.numel() else torch.empty(0, dtype=torch.uint8, device=t.device)


def views(torch, buf, metas):
    """Tensors over a flat uint8 tensor, one per meta."""
    out = []
    for m in metas:
        dt = getattr(torch, m["dtype"])
        n, off = m["nbytes"], m["offset"]
        out.append(buf[off:off + n].view(dt).reshape(m["shape"]) if n else torch.empty(m["shape"], dtype=dt, device=buf.device))
    return out


# ------------------------------------------------------------- CPU: memfds


def new_memfd(name, size):
    """A memfd of size bytes whose pages exist already (fallocate), so that
    writing it later costs a copy and no page allocation."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        if size:
            os.posix_fallocate(fd, 0, size)
    except BaseException:
        os.close(fd)
        raise
    return fd


def fill_and_seal(fd, torch, tensors, metas, strict=False):
    """Write the tensors at their metas' offsets into fd, then seal it."""
    for t, m in zip(tensors, metas):
        if m["nbytes"]:
            os.pwrite(fd, memoryview(raw_bytes(torch, t).cpu().numpy()), m["offset"])
    seal(fd, strict)


def seal(fd, strict=False):
    """Seal fd against every change. F_SEAL_WRITE fails with EBUSY while
    any of the file's pages holds an extra reference, and a page just
    written can sit in another CPU's LRU batch, which the kernel does not
    drain for us (one run in five of a CPU case on a busy host): retried a
    few times, then F_SEAL_FUTURE_WRITE, which refuses every later write
    and writable mapping just the same and waits for no page. Neither side
    keeps a writable mapping of what it hands over, so the two are alike
    here. strict (the worker's outputs, whose side the judge cannot
    vouch for: a writable mapping kept open also makes EBUSY) allows no
    fallback and raises instead."""
    for _ in range(SEAL_TRIES):
        try:
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
            return
        except OSError as e:
            if e.errno != errno.EBUSY:
                raise
            time.sleep(0.001)
    if strict:
        raise OSError(errno.EBUSY, "F_SEAL_WRITE: the memfd stayed busy")
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, FUTURE_SEALS)


def sealed_memfd(name, torch, tensors, metas, size):
    """A memfd holding the tensors at their metas' offsets, sealed."""
    fd = new_memfd(name, size)
    try:
        fill_and_seal(fd, torch, tensors, metas)
    except BaseException:
        os.close(fd)
        raise
    return fd


def is_sealed(fd):
    """Whether fd is a memfd that can no longer change (its size included):
    F_SEAL_WRITE, which the kernel grants only when no writable mapping
    of it is left. (F_SEAL_FUTURE_WRITE would let a mapping kept open go
    on writing: the judge's own inputs may fall back to it, the worker's
    outputs may not.)"""
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError:
        return False
    return seals & SEALS == SEALS


def map_memfd(torch, fd, size, private=False):
    """A read-only flat uint8 tensor over a sealed memfd (a write to it is
    a SIGSEGV, so an input cannot be changed in place). private: a
    writable copy-on-write mapping instead (a KernelBot problem's input,
    which its submission may write as KernelBot's harness lets it), the
    memfd itself unchanged; where the kernel refuses one of a
    write-sealed memfd (before Linux 6.7), a copy."""
    if size == 0:
        return torch.empty(0, dtype=torch.uint8)
    if private:
        try:
            mm = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError:
            return read_memfd(torch, fd, size)
        return torch.frombuffer(mm, dtype=torch.uint8)
    # MAP_POPULATE: the page faults happen here, not in the timed call.
    mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0x8000), prot=mmap.PROT_READ)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "the given buffer is not writable": on purpose
        return torch.frombuffer(mm, dtype=torch.uint8)


def read_memfd(torch, fd, size):
    """A private copy of a memfd's bytes as a flat uint8 tensor."""
    raw = bytearray(size or 1)
    view, off = memoryview(raw), 0
    while off < size:
        n = os.preadv(fd, [view[off:size]], off)
        if n <= 0:
            raise OSError("the memfd is shorter than it says")
        off += n
    return torch.frombuffer(raw, dtype=torch.uint8)[:size]


# ---------------------------------------------------- CUDA: driver memory


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * 64)]


class _DeviceArray:
    """Device memory as __cuda_array_interface__, so torch wraps it
    without a copy."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "strides": None,
                                         "version": 2}


class Driver:
    """The few CUDA driver calls the judge and the worker need, on the
    context torch made current."""

    def __init__(self):
        self.cu = cu = ctypes.CDLL("libcuda.so.1")
        cu.cuMemAlloc_v2.argtypes = (ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t)
        cu.cuMemFree_v2.argtypes = (ctypes.c_uint64,)
        cu.cuIpcGetMemHandle.argtypes = (ctypes.POINTER(_Handle), ctypes.c_uint64)
        cu.cuIpcOpenMemHandle_v2.argtypes = (ctypes.POINTER(ctypes.c_uint64), _Handle, ctypes.c_uint)
        cu.cuIpcCloseMemHandle.argtypes = (ctypes.c_uint64,)
        cu.cuMemGetAddressRange_v2.argtypes = (ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64)

    def _ok(self, rc, what):
        if rc:
            raise RuntimeError(f"{what}: CUresult {rc}")

    def alloc(self, nbytes):
        ptr = ctypes.c_uint64()
        self._ok(self.cu.cuMemAlloc_v2(ctypes.byref(ptr), max(nbytes, 1)), f"cuMemAlloc({nbytes})")
        return ptr.value

    def free(self, ptr):
        self._ok(self.cu.cuMemFree_v2(ptr), "cuMemFree")

    def export(self, ptr) -> str:
        h = _Handle()
        self._ok(self.cu.cuIpcGetMemHandle(ctypes.byref(h), ptr), "cuIpcGetMemHandle")
        return bytes(h.reserved).hex()

    def open(self, handle: str):
        raw = bytes.fromhex(handle)
        if len(raw) != 64:
            raise ValueError("an IPC handle is not 64 bytes")
        h = _Handle()
        ctypes.memmove(ctypes.addressof(h), raw, 64)
        ptr = ctypes.c_uint64()
        self._ok(self.cu.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), h, 1), "cuIpcOpenMemHandle")
        return ptr.value

    def close(self, ptr):
        self._ok(self.cu.cuIpcCloseMemHandle(ptr), "cuIpcCloseMemHandle")

    def range(self, ptr):
        """(base, size) of the allocation that holds ptr."""
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        self._ok(self.cu.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ptr), "cuMemGetAddressRange")
        return base.value, size.value

    def extent(self, ptr):
        """The bytes from ptr to the end of its allocation."""
        base, size = self.range(ptr)
        return base + size - ptr


def device_bytes(torch, ptr, nbytes):
    """A flat uint8 CUDA tensor over nbytes at ptr (no copy)."""
    return torch.as_tensor(_DeviceArray(ptr, nbytes), device="cuda")
