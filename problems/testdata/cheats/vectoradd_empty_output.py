# Cheat (CPU and GPU): returns uninitialised memory, hoping the allocator
# hands back the block where the reference's answer was. The harness
# computes the reference first and keeps its answer alive across the call.
# corpus: fail test elements differ
import torch


def custom_kernel(data):
    a, b = data
    return torch.empty_like(a)
