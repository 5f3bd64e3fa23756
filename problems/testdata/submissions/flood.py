# Floods stdout, then answers correctly.
import sys


def custom_kernel(data):
    sys.stdout.write("x" * (4 << 20))
    a, b = data
    return a + b
