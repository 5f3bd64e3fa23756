import torch

from utils import set_seed


def generate_input(size, seed):
    set_seed(seed)
    return torch.randn(size)


def ref_kernel(data):
    return data.clone()


def check_implementation(data, output):
    if torch.equal(output, ref_kernel(data)):
        return True, ""
    return False, "output differs from the input"
