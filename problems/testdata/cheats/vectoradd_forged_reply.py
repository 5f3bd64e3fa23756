# Cheat (CPU and GPU): returns zeros, and while it loads writes a forged
# "passed" answer (with 1 ns times) into the worker's own reply pipe (its
# number was on the old worker's command line), ahead of the worker's true
# one. The judge believes no reply: it reads the output itself.
# corpus: fail test elements differ
# corpus: fail benchmark elements differ
import os
import re

with open("/proc/self/cmdline", "rb") as f:
    _fds = re.search(rb"worker_main\((\d+), (\d+)", f.read())
if _fds:
    os.write(int(_fds.group(2)), b'{"ok": true, "message": "", "times": [1.0, 1.0, 1.0]}\n')


def custom_kernel(data):
    a, b = data
    return a * 0
