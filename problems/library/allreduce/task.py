# The types of this problem, under the names KernelBot's problems give
# them (`from task import input_t, output_t`), so that a solution written
# for either kind of problem imports on both.
from typing import TypedDict

import torch

# this rank's vector
input_t = torch.Tensor
output_t = torch.Tensor


class TestSpec(TypedDict):
    n: int
    world_size: int
    seed: int
