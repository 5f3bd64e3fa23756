# Cheat (CPU and GPU): honest on the first call of each shape (the one the
# harness checks against the pristine input), then adds in place into its
# input, saving the output's allocation, on the timed calls. On the CPU the
# input is mapped read-only (the write is a SIGSEGV); on CUDA the judge
# compares the shared input with its own copy after every call.
# corpus: fail leaderboard inputs are read-only
_seen = set()


def custom_kernel(data):
    a, b = data
    if tuple(a.shape) not in _seen:
        _seen.add(tuple(a.shape))
        return a + b
    return a.add_(b)
