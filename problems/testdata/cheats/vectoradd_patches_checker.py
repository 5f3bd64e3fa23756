# Cheat (CPU and GPU): returns zeros and replaces the harness's own checker
# in the worker (eval is importable from there) so every output passes,
# through names the static scanner does not spell out. The checker that
# counts is the judge's, in another process.
# corpus: fail test elements differ
# corpus: fail benchmark elements differ
import importlib
import sys

_h = sys.modules.get("ev" + "al") or importlib.import_module("ev" + "al")
setattr(getattr(_h, "_Wor" + "ker"), "ch" + "eck", lambda self, data, expected, output: (True, ""))


def custom_kernel(data):
    a, b = data
    return a * 0
