# Cheat (CPU and GPU): returns zeros, and while it loads writes a forged
# "passed" answer (with 1 ns times) into the worker's own reply pipe (its number is on the
# worker's command line), ahead of the worker's true one. The harness's own
# process takes no success that did not hand over the output it claims.
# corpus: fail test did not hand over its output
# corpus: fail benchmark did not hand over its output
import os
import re

with open("/proc/self/cmdline", "rb") as f:
    _fds = re.search(rb"worker_main\((\d+), (\d+)", f.read())
if _fds:
    os.write(int(_fds.group(2)), b'{"ok": true, "message": "", "times": [1.0, 1.0, 1.0]}\n')


def custom_kernel(data):
    a, b = data
    return a * 0
