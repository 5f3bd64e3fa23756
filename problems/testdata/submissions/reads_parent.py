# Correct only if the harness's own process is out of reach: its
# environment (where the secret seed was), its descriptors (the result
# stream) and its memory, all through /proc. Inside the sandbox the
# harness makes itself non-dumpable, which closes all three.
import os

PARENT = f"/proc/{os.getppid()}"
LEAKED = []
try:
    with open(PARENT + "/environ", "rb") as f:
        if b"POPCORN" in f.read():
            LEAKED.append("environ")
except OSError:
    pass
try:
    for name in os.listdir(PARENT + "/fd"):
        try:
            os.close(os.open(f"{PARENT}/fd/{name}", os.O_WRONLY))
            LEAKED.append("fd " + name)
        except OSError:
            pass
except OSError:
    pass
try:
    open(PARENT + "/mem", "rb").close()
    LEAKED.append("mem")
except OSError:
    pass


def custom_kernel(data):
    if LEAKED:
        raise RuntimeError("the harness's process is readable: " + ", ".join(LEAKED))
    a, b = data
    return a + b
