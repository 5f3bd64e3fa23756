# Correct: swaps the counts, then sends each peer its block and receives
# each peer's with point-to-point messages; keeps its own block in place.
import torch
import torch.distributed as dist


def custom_kernel(data):
    x, dest = data
    world, rank = dist.get_world_size(), dist.get_rank()
    counts = torch.bincount(dest, minlength=world)
    recv = torch.empty_like(counts)
    dist.all_to_all_single(recv, counts)
    gloo = dist.get_backend() == "gloo"
    blocks, ops = [], []
    for r in range(world):
        if r == rank:
            blocks.append(x[dest == rank])
            continue
        block = x.new_empty((int(recv[r]), x.shape[1]))
        blocks.append(block)
        mine = x[dest == r].contiguous()
        if mine.shape[0]:
            ops.append(dist.isend(mine.view(torch.float16) if gloo else mine, r))
        if block.shape[0]:
            ops.append(dist.irecv(block.view(torch.float16) if gloo else block, r))
    for op in ops:
        op.wait()
    return torch.cat(blocks)
