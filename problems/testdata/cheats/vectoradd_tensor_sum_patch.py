# Cheat (CPU and GPU): returns zeros and makes the worker's comparison
# count no mismatches by replacing torch.Tensor.sum, which the harness does
# not guard. The harness's own process, whose torch the submission never
# touched, checks the output again.
# corpus: fail test the harness's own check:
# corpus: fail benchmark the harness's own check:
import torch

_real = torch.Tensor.sum


def _sum(self, *args, **kwargs):
    if self.dtype == torch.bool:
        return torch.zeros((), dtype=torch.int64)
    return _real(self, *args, **kwargs)


torch.Tensor.sum = _sum


def custom_kernel(data):
    a, b = data
    return a * 0
