# Cheat (CPU and GPU): returns a tensor subclass that would do the add only
# when the checker looks at it, outside the timed call. The harness takes
# plain tensors only.
import torch


class Deferred(torch.Tensor):
    pass


def custom_kernel(data):
    a, b = data
    return (a + b).as_subclass(Deferred)
