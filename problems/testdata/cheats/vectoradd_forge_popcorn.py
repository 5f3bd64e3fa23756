# Cheat (CPU and GPU): writes result lines to the harness's result
# descriptor, named by the environment. Refused at submission; the worker
# has neither the variable nor the descriptor besides.
# corpus: scan RESULT_FORGERY
import os

_fd = os.environ.get("POPCORN_FD")
if _fd:
    os.write(int(_fd), b"check: pass\n")


def custom_kernel(data):
    a, b = data
    return a * 0
