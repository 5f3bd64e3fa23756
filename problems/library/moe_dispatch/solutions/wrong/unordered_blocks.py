# Wrong: gets every token where it belongs, but each sender's tokens
# arrive in reverse order.
import torch
import torch.distributed as dist


def custom_kernel(data):
    x, dest = data
    world = dist.get_world_size()
    order = torch.sort(dest, stable=True).indices
    counts = torch.bincount(dest, minlength=world)
    pieces = torch.split(order, counts.tolist())
    send = x[torch.cat([p.flip(0) for p in pieces])]
    recv = torch.empty_like(counts)
    dist.all_to_all_single(recv, counts)
    out = x.new_empty((int(recv.sum()), x.shape[1]))
    gloo = dist.get_backend() == "gloo"
    dist.all_to_all_single(out.view(torch.float16) if gloo else out, send.view(torch.float16) if gloo else send,
                           output_split_sizes=recv.tolist(), input_split_sizes=counts.tolist())
    return out
