# Correct: starts the gather, multiplies this rank's own rows while it
# runs, then the others' as the gather completes.
import torch
import torch.distributed as dist


def _mm(x, b):
    if x.is_cuda:
        return x @ b
    return (x.float() @ b.float()).to(torch.bfloat16)


def custom_kernel(data):
    a, b = data
    world, rank = dist.get_world_size(), dist.get_rank()
    wire = a.view(torch.float16) if dist.get_backend() == "gloo" else a
    parts = [torch.empty_like(wire) for _ in range(world)]
    work = dist.all_gather(parts, wire, async_op=True)
    m = a.shape[0]
    out = torch.empty((world * m, b.shape[1]), dtype=torch.bfloat16, device=a.device)
    out[rank * m:(rank + 1) * m] = _mm(a, b)
    work.wait()
    for r, p in enumerate(parts):
        if r != rank:
            out[r * m:(r + 1) * m] = _mm(p.view(torch.bfloat16), b)
    return out
