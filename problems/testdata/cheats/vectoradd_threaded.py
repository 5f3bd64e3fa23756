# Cheat (CPU and GPU): a background thread keeps working between calls,
# outside the timed window. Flagged for review.
# corpus: scan THREADS
import threading

_done = threading.Event()


def custom_kernel(data):
    a, b = data
    out = a.clone()
    worker = threading.Thread(target=lambda: (out.add_(b), _done.set()))
    worker.start()
    worker.join()
    return out
