import torch

from utils import set_seed

# On the GPU, as reference-kernels' problems are: our judge hands the
# submission its inputs on the device it judges on.
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def generate_input(sizes, seed):
    set_seed(seed)
    return [torch.randn(n, device=DEVICE) for n in sizes]


def check_implementation(data, output):
    if len(output) == len(data) and all(torch.equal(a, b) for a, b in zip(data, output)):
        return True, ""
    return False, "a group's output differs from its input"
