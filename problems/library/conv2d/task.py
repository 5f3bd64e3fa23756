# The types of this problem, under the names KernelBot's problems give
# them (`from task import input_t, output_t`), so that a solution written
# for either kind of problem imports on both.
from typing import Tuple, TypedDict

import torch

# (x, w, stride, padding)
input_t = Tuple[torch.Tensor, torch.Tensor, int, int]
output_t = torch.Tensor


class TestSpec(TypedDict):
    batch: int
    in_ch: int
    out_ch: int
    size: int
    kernel: int
    stride: int
    padding: int
    seed: int
