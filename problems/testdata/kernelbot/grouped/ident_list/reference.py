import torch

from utils import set_seed


def generate_input(sizes, seed):
    set_seed(seed)
    return [torch.randn(n) for n in sizes]


def check_implementation(data, output):
    if len(output) == len(data) and all(torch.equal(a, b) for a, b in zip(data, output)):
        return True, ""
    return False, "a group's output differs from its input"
