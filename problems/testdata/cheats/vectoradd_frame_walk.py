# Cheat (CPU and GPU): walks up the call stack to the harness's frame and
# returns a copy of the reference's answer it finds there. The values are
# right, so only the scanner (and on a GPU the physics floor) stops it:
# flagged for review.
# corpus: scan EVALUATOR_INSPECTION
# corpus: nogain leaderboard
import sys


def custom_kernel(data):
    frame = sys._getframe(1)
    while frame is not None:
        if "expected" in frame.f_locals and frame.f_locals["expected"] is not None:
            return frame.f_locals["expected"].clone()
        frame = frame.f_back
    a, b = data
    return a + b
