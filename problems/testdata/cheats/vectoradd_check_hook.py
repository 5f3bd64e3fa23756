# Cheat (CPU and GPU): returns an uninitialised tensor at once and does the
# real work inside a hook on torch.Tensor.double, the first thing the
# comparison calls on an output, so the work lands after the timed window.
# The comparison runs in the judge's process, whose torch the hook never
# reaches: the output it reads is garbage.
# corpus: fail test elements differ
# corpus: fail benchmark elements differ
import torch

_pending = {}
_real = torch.Tensor.double


def _double(self, *args, **kwargs):
    job = _pending.pop(id(self), None)
    if job is not None:
        torch.add(job[0], job[1], out=self)
    return _real(self, *args, **kwargs)


setattr(torch.Tensor, "dou" + "ble", _double)


def custom_kernel(data):
    a, b = data
    out = torch.empty_like(a)
    _pending[id(out)] = (a, b)
    return out
