# Wrong: gathers every rank's rows but stacks them in reverse rank order.
import torch
import torch.distributed as dist


def custom_kernel(data):
    a, b = data
    world = dist.get_world_size()
    wire = a.view(torch.float16) if dist.get_backend() == "gloo" else a
    parts = [torch.empty_like(wire) for _ in range(world)]
    dist.all_gather(parts, wire)
    full = torch.cat([p.view(torch.bfloat16) for p in reversed(parts)])
    return (full.float() @ b.float()).to(torch.bfloat16)
