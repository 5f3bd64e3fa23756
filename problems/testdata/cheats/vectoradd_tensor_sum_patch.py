# Cheat (CPU and GPU): returns zeros and makes the worker's comparison
# count no mismatches by replacing torch.Tensor.sum. No comparison runs in
# the worker any more: the judge, whose torch the submission never touched,
# checks the output.
# corpus: fail test elements differ
# corpus: fail benchmark elements differ
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
