# Cheat (CPU and GPU): returns a tensor subclass that would do the add only
# when the checker looks at it, outside the timed call. The harness takes
# plain tensors only.
# corpus: fail test a subclass of torch.Tensor
# corpus: fail benchmark a subclass of torch.Tensor
import torch


class Deferred(torch.Tensor):
    pass


def custom_kernel(data):
    a, b = data
    return (a + b).as_subclass(Deferred)
