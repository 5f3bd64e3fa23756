# The types of this problem, under the names KernelBot's problems give
# them (`from task import input_t, output_t`), so that a solution written
# for either kind of problem imports on both.
from typing import Tuple, TypedDict

import torch

# this rank's (a, b)
input_t = Tuple[torch.Tensor, torch.Tensor]
output_t = torch.Tensor


class TestSpec(TypedDict):
    m: int
    k: int
    n: int
    world_size: int
    seed: int
