# Wrong: leaves out the tokens a rank routes to itself.
import torch
import torch.distributed as dist


def custom_kernel(data):
    x, dest = data
    world, rank = dist.get_world_size(), dist.get_rank()
    dest = torch.where(dest == rank, torch.full_like(dest, -1), dest)
    keep = dest >= 0
    x, dest = x[keep], dest[keep]
    order = torch.sort(dest, stable=True).indices
    send = x[order]
    counts = torch.bincount(dest, minlength=world)
    recv = torch.empty_like(counts)
    dist.all_to_all_single(recv, counts)
    out = x.new_empty((int(recv.sum()), x.shape[1]))
    gloo = dist.get_backend() == "gloo"
    dist.all_to_all_single(out.view(torch.float16) if gloo else out, send.view(torch.float16) if gloo else send,
                           output_split_sizes=recv.tolist(), input_split_sizes=counts.tolist())
    return out
