# Cheat (CPU and GPU): honest on the first call of each shape (the one the
# harness checks against the pristine input), then adds in place into its
# input, saving the output's allocation, on the timed calls. The ranked
# phase compares every timed iteration's input with a pristine copy.
# corpus: fail leaderboard modified its input
_seen = set()


def custom_kernel(data):
    a, b = data
    if tuple(a.shape) not in _seen:
        _seen.add(tuple(a.shape))
        return a + b
    return a.add_(b)
