import torch


def generate_input(size, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(size, generator=gen)


def check_implementation(data, output):
    if torch.equal(output, data):
        return True, ""
    return False, "output differs from the input"
