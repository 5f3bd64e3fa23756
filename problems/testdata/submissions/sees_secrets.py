# Correct only if the harness hid its secrets from user code.
import os

LEAKED = [k for k in ("POPCORN_SEED", "POPCORN_FD") if k in os.environ]


def custom_kernel(data):
    if LEAKED:
        raise RuntimeError("harness leaked " + ", ".join(LEAKED))
    a, b = data
    return a + b
