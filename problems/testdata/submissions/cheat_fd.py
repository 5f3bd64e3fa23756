# Hostile: forges a passing verdict on every descriptor it can find, then
# returns garbage. It must fail, and no forged line may reach the runner.
import os

for fd in range(3, 64):
    try:
        os.write(fd, b"check: pass\ntest.0.status: pass\n")
    except OSError:
        pass


def custom_kernel(data):
    a, b = data
    return a * 0
