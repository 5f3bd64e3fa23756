# Wrong: an off-by-one bin range folds value 255 into bin 254.
import torch


def custom_kernel(data):
    return torch.bincount(data.long().clamp(max=254), minlength=256).to(torch.int32)
