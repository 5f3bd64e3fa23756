"""Checks that the bundled problems' inputs do not make them trivial: outputs
depend on the seed, are not constant, and are finite (run by
TestHarness_PythonUnitTests with PYTHONPATH holding the harness)."""

import importlib
import os
import re
import sys
import unittest

import torch

LIBRARY = os.environ["KERNELBOX_LIBRARY"]


def tests_of(problem):
    """The test cases of task.yml, read with the same flat syntax the
    bundled problems use ({key: value, ...} on one line)."""
    cases = []
    in_tests = False
    with open(os.path.join(LIBRARY, problem, "task.yml")) as f:
        lines = f.readlines()
    for line in lines:
        if re.match(r"^\w", line):
            in_tests = line.startswith("tests:")
            continue
        m = re.match(r"^\s+- \{(.*)\}\s*$", line)
        if in_tests and m:
            case = {}
            for part in m.group(1).split(","):
                k, v = part.split(":")
                case[k.strip()] = int(v)
            cases.append(case)
    return cases


def flat(out):
    if isinstance(out, (tuple, list)):
        return torch.cat([flat(o) for o in out])
    return out.detach().double().reshape(-1).cpu()


def reference_output(ref, case):
    """The reference's output: a multi-GPU problem's takes every rank's
    input and returns every rank's output."""
    if "world_size" in case:
        return ref.ref_kernel([ref.generate_input(**case, rank=r) for r in range(case["world_size"])])
    return ref.ref_kernel(ref.generate_input(**case))


class LibraryInputsTest(unittest.TestCase):
    def test_outputs_depend_on_seed_and_vary(self):
        problems = sorted(p for p in os.listdir(LIBRARY) if os.path.exists(os.path.join(LIBRARY, p, "task.yml")))
        self.assertGreaterEqual(len(problems), 12)
        for problem in problems:
            sys.path.insert(0, os.path.join(LIBRARY, problem))
            sys.modules.pop("reference", None)
            try:
                ref = importlib.import_module("reference")
                cases = tests_of(problem)
                self.assertGreaterEqual(len(cases), 5, problem)
                # The largest test case says most about the distribution.
                case = max(cases, key=lambda c: sum(v for k, v in c.items() if k != "seed"))
                a = flat(reference_output(ref, case))
                b = flat(reference_output(ref, dict(case, seed=case["seed"] + 1)))
                with self.subTest(problem=problem, case=case):
                    self.assertTrue(torch.isfinite(a).all(), "reference output has NaN or Inf")
                    self.assertFalse(torch.equal(a, b), "output does not depend on the seed")
                    if a.numel() > 1:
                        self.assertGreater(float(a.std()), 0.0, "output is constant")
                    self.assertGreater(float(a.abs().max()), 0.0, "output is all zeros")
            finally:
                sys.path.pop(0)


if __name__ == "__main__":
    unittest.main()
