#!POPCORN leaderboard quick
def custom_kernel(xs):
    return [2 * x for x in xs[:-1]] + [0]
