# Wrong: returns a tensor subclass instead of a plain tensor.
import torch


class Lazy(torch.Tensor):
    pass


def custom_kernel(data):
    a, b = data
    return (a + b).as_subclass(Lazy)
