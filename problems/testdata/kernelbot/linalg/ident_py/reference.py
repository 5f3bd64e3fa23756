import torch

from utils import set_seed

# On the GPU, as reference-kernels' problems are: our judge hands the
# submission its inputs on the device it judges on.
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def generate_input(size, seed):
    set_seed(seed)
    return torch.randn(size, device=DEVICE)


def ref_kernel(data):
    return data.clone()


def check_implementation(data, output):
    if torch.equal(output, ref_kernel(data)):
        return True, ""
    return False, "output differs from the input"
