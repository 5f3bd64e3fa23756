# All-reduce with torch.distributed: one collective on the default group.
import torch
import torch.distributed as dist


def custom_kernel(data):
    if dist.get_backend() == "gloo":
        # Debian's gloo reduces no bfloat16.
        total = data.float()
        dist.all_reduce(total)
        return total.to(torch.bfloat16)
    out = data.clone()
    dist.all_reduce(out)
    return out
