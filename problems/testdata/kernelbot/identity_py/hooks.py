# A cheat on a KernelBot-format problem: it returns zeros, and makes the
# checker's comparison (torch.equal) and the inputs (generate_input) agree
# with it. In the process that times and checks it (the problem's own
# harness) that works; under our judge it changes only its own process.
import torch

import reference

torch.equal = lambda a, b: True
reference.generate_input = lambda size, seed: torch.zeros(size)


def custom_kernel(data):
    return torch.zeros_like(data)
