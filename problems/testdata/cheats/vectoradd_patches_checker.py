# Cheat (CPU and GPU): returns zeros and replaces the harness's own checker
# in the worker (eval is importable from there) so every output passes,
# through names the static scanner does not spell out. The harness holds
# its own functions among the guarded ones and checks them after every job,
# with the checking code bound before the submission loads.
import importlib
import sys

_h = sys.modules.get("ev" + "al") or importlib.import_module("ev" + "al")
setattr(getattr(_h, "_Wor" + "ker"), "ch" + "eck", lambda self, data, expected, output: (True, ""))


def custom_kernel(data):
    a, b = data
    return a * 0
