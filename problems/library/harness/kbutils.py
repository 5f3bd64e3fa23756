"""Utilities shared by kernelbox's bundled problems and its harness.

A problem's reference.py imports these to pick the device, seed its
generators, run the reference deterministically and compare outputs. They are
written for Python 3.11+ with PyTorch 1.13 (Debian's CPU build) or 2.x with
CUDA or ROCm (which PyTorch also calls "cuda").
"""

import contextlib
import math
import os

import torch


def device() -> str:
    """The device inputs are generated on: cuda when present, else cpu."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def generator(seed: int, dev: str = None) -> torch.Generator:
    """A generator seeded for one case, on the device that will use it."""
    dev = dev or device()
    g = torch.Generator(device=dev)
    g.manual_seed(int(seed) % (2**63))
    return g


@contextlib.contextmanager
def deterministic():
    """Run the reference with deterministic algorithms and without TF32, so
    its answer does not depend on the run; restores the settings after."""
    saved = (
        torch.are_deterministic_algorithms_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
    )
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    try:
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        yield
    finally:
        torch.use_deterministic_algorithms(saved[0], warn_only=True)
        torch.backends.cudnn.deterministic = saved[1]
        torch.backends.cudnn.benchmark = saved[2]
        torch.backends.cuda.matmul.allow_tf32 = saved[3]
        torch.backends.cudnn.allow_tf32 = saved[4]


def clone_data(data):
    """A deep copy of tensors inside tuples, lists and dicts."""
    if isinstance(data, torch.Tensor):
        return data.clone()
    if isinstance(data, tuple):
        return tuple(clone_data(x) for x in data)
    if isinstance(data, list):
        return [clone_data(x) for x in data]
    if isinstance(data, dict):
        return {k: clone_data(v) for k, v in data.items()}
    return data


def same_data(a, b) -> bool:
    """Whether two nested inputs hold bit-identical tensors (NaN equal to NaN)."""
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.is_floating_point() or a.is_complex():
            return bool(torch.equal(torch.nan_to_num(a, nan=0.0), torch.nan_to_num(b, nan=0.0))
                        and torch.equal(torch.isnan(a), torch.isnan(b)))
        return bool(torch.equal(a, b))
    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(same_data(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_data(a[k], b[k]) for k in a)
    return a == b


def _fmt(x) -> str:
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def tensor_mismatch(received, expected=None, where="the output") -> str:
    """Why received is not a plain tensor like expected, or "": a subclass
    (which can defer its work into the untimed check), a tensor without
    storage, or, where expected is known, another dtype, shape or device."""
    if not isinstance(received, torch.Tensor):
        return f"{where} is a {type(received).__name__}, expected a torch.Tensor"
    if type(received) is not torch.Tensor:
        return f"{where} is a {type(received).__name__}, a subclass of torch.Tensor: expected a plain torch.Tensor"
    if received.device.type == "meta":
        return f"{where} has no storage (a meta tensor)"
    if expected is None:
        return ""
    if received.shape != expected.shape:
        return f"shape mismatch: {where} has shape {tuple(received.shape)}, expected {tuple(expected.shape)}"
    if received.dtype != expected.dtype:
        return f"dtype mismatch: {where} is {received.dtype}, expected {expected.dtype}"
    if received.device != expected.device:
        return f"device mismatch: {where} is on {received.device}, expected {expected.device}"
    return ""


def verbose_allclose(received, expected, rtol=1e-5, atol=1e-8, max_print=5):
    """Compare a tensor with the expected one: |r - e| <= atol + rtol*|e|,
    NaN and +-Inf must sit where the expected has them. Returns a list of
    human-readable reasons, empty when they match."""
    msg = tensor_mismatch(received, expected)
    if msg:
        return [msg]
    if expected.numel() == 0:
        return []
    exact = not (expected.is_floating_point() or expected.is_complex())
    if exact:
        bad = received != expected
    else:
        r = received.double()
        e = expected.double()
        nan_bad = torch.isnan(r) ^ torch.isnan(e)
        pinf_bad = torch.isposinf(r) ^ torch.isposinf(e)
        ninf_bad = torch.isneginf(r) ^ torch.isneginf(e)
        finite = torch.isfinite(r) & torch.isfinite(e)
        diff = torch.where(finite, (r - e).abs(), torch.zeros_like(r))
        tol_bad = finite & (diff > atol + rtol * e.abs())
        bad = nan_bad | pinf_bad | ninf_bad | tol_bad
    count = int(bad.sum().item())
    if count == 0:
        return []
    reasons = [f"{count} of {expected.numel()} elements differ (rtol={rtol:g}, atol={atol:g})"]
    idx = torch.nonzero(bad)[:max_print]
    for row in idx.tolist():
        pos = tuple(row)
        got = received[pos].item()
        want = expected[pos].item()
        reasons.append(f"at {pos}: got {_fmt(got)}, expected {_fmt(want)}")
    return reasons


def make_checker(expected, compare):
    """Build a check_implementation(data, output) from two parts:
    expected(data) computes whatever compare(expected, output) -> (ok, message)
    needs. The harness calls the parts itself: expected on the pristine input
    before the submission runs (so the reference runs first and its result
    stays alive), compare after."""

    def check_implementation(data, output):
        with deterministic():
            e = expected(clone_data(data))
        return compare(e, output)

    check_implementation.expected = expected
    check_implementation.compare = compare
    return check_implementation


def compare_outputs(expected, output, rtol, atol):
    """Compare a tensor, or a tuple of tensors, with the expected ones."""
    if isinstance(expected, (tuple, list)):
        if not isinstance(output, (tuple, list)) or len(output) != len(expected):
            return False, f"expected a sequence of {len(expected)} tensors, got {type(output).__name__}"
        for i, (o, e) in enumerate(zip(output, expected)):
            reasons = verbose_allclose(o, e, rtol=rtol, atol=atol)
            if reasons:
                return False, f"output {i}: " + "\n".join(reasons)
        return True, ""
    reasons = verbose_allclose(output, expected, rtol=rtol, atol=atol)
    return (not reasons), "\n".join(reasons)


def match_reference(ref_kernel, rtol=1e-5, atol=1e-8):
    """The usual checker: elementwise comparison with ref_kernel's output."""
    return make_checker(ref_kernel, lambda e, o: compare_outputs(e, o, rtol, atol))


def rel_scale(seed: int, lo: float, hi: float) -> float:
    """A per-case constant in [lo, hi), drawn from its own generator so that
    problems can randomise offsets and scales that a shortcut cannot guess."""
    g = torch.Generator(device="cpu")
    g.manual_seed((int(seed) * 2654435761 + 97) % (2**63))
    return lo + (hi - lo) * float(torch.rand(1, generator=g).item())


def isqrt_ceil(n: int) -> int:
    return int(math.ceil(math.sqrt(n)))
