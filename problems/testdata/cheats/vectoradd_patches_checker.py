# Cheat (CPU and GPU): returns zeros and replaces the harness's own
# checkers in the worker (the judge's module and the older multi-GPU path's
# are importable from there) so every output passes, through names the
# static scanner does not spell out. The checker that counts is the
# judge's, in another process.
# corpus: fail test elements differ
# corpus: fail benchmark elements differ
import importlib
import sys

_g = sys.modules.get("ga" + "ng") or importlib.import_module("ga" + "ng")
setattr(getattr(_g, "_Wor" + "ker"), "ch" + "eck", lambda self, data, expected, output: (True, ""))
_j = sys.modules.get("ju" + "dge") or importlib.import_module("ju" + "dge")
setattr(_j, "ver" + "dict", lambda *args: (True, ""))


def custom_kernel(data):
    a, b = data
    return a * 0
