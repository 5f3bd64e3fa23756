# Cheat (CPU and GPU): imports the reference's input generator and
# precomputes the answers of the public benchmark cases at import, to
# replay them. Refused at submission; ranked iterations draw fresh seeds in
# the judge besides, so the replayed answers are wrong there.
# corpus: scan HARNESS_PATCH
# corpus: fail leaderboard elements differ
from reference import generate_input

_answers = {}
for rows, cols, seed in ((256, 4096, 54352), (1024, 4096, 93246)):
    x, y = generate_input(rows=rows, cols=cols, seed=seed)
    _answers[(rows, cols)] = x + y


def custom_kernel(data):
    a, b = data
    hit = _answers.get(tuple(a.shape))
    return hit.clone() if hit is not None else a + b
