# Cheat (GPU; caught on the CPU backend too): shortens every CUDA event
# time, through names the scanner does not spell out. The harness guards
# torch.cuda.Event's methods for identity.
# corpus: fail test the submission replaced torch.cuda.Event.elapsed_time
import importlib

_cuda = importlib.import_module("torch.cu" + "da")
_ev = getattr(_cuda, "Ev" + "ent")
_real = getattr(_ev, "elapsed_" + "time")
setattr(_ev, "elapsed_" + "time", lambda self, end: _real(self, end) / 10)


def custom_kernel(data):
    a, b = data
    return a + b
