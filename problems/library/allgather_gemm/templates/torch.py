# All-gather, then one GEMM: no overlap.
import torch
import torch.distributed as dist


def custom_kernel(data):
    a, b = data
    world = dist.get_world_size()
    if dist.get_backend() == "gloo":
        # Debian's gloo moves no bfloat16: move the bits as float16.
        parts = [torch.empty_like(a).view(torch.float16) for _ in range(world)]
        dist.all_gather(parts, a.view(torch.float16))
        full = torch.cat(parts).view(torch.bfloat16)
        return (full.float() @ b.float()).to(torch.bfloat16)
    full = torch.empty((world * a.shape[0], a.shape[1]), dtype=a.dtype, device=a.device)
    dist.all_gather_into_tensor(full, a)
    return full @ b
