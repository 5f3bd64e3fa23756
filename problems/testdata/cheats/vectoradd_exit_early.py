# Cheat (CPU and GPU): exits with status 0 inside the call, hoping the
# harness takes a clean exit for a pass. It fails.
# corpus: fail test exited with status 0
import os


def custom_kernel(data):
    os._exit(0)
