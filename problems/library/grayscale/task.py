# The types of this problem, under the names KernelBot's problems give
# them (`from task import input_t, output_t`), so that a solution written
# for either kind of problem imports on both.
from typing import TypedDict

import torch

# an H x W x 3 image
input_t = torch.Tensor
output_t = torch.Tensor


class TestSpec(TypedDict):
    height: int
    width: int
    seed: int
