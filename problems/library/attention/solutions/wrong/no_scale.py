# Wrong: leaves out the 1/sqrt(head size) scale.
import torch


def custom_kernel(data):
    q, k, v = (t.float() for t in data)
    seq = q.shape[-2]
    scores = q @ k.transpose(-1, -2)
    scores = scores.masked_fill(torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return (torch.softmax(scores, -1) @ v).to(torch.bfloat16)
