# Wrong: sums the other ranks' vectors and leaves out its own.
import torch
import torch.distributed as dist


def custom_kernel(data):
    total = data.float()
    dist.all_reduce(total)
    return (total - data.float()).to(torch.bfloat16)
