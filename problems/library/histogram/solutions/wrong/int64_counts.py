# Wrong: right counts, wrong dtype (int64 where int32 is asked for).
import torch


def custom_kernel(data):
    return torch.bincount(data.long(), minlength=256)
