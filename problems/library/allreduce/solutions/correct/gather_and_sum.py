# Correct, and slower: every rank gathers every vector and sums them
# itself, in float32, in rank order.
import torch
import torch.distributed as dist


def custom_kernel(data):
    world = dist.get_world_size()
    wire = data.float() if dist.get_backend() == "gloo" else data
    parts = [torch.empty_like(wire) for _ in range(world)]
    dist.all_gather(parts, wire)
    total = torch.zeros_like(data, dtype=torch.float32)
    for p in parts:
        total += p.float()
    return total.to(torch.bfloat16)
