# Cheat (CPU and GPU): kills the harness's own process, hoping a run
# without a verdict counts. It fails.
# corpus: fail test killed
import os
import signal


def custom_kernel(data):
    os.kill(os.getppid(), signal.SIGKILL)
    a, b = data
    return a + b
