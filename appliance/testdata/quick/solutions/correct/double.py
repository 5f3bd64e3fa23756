#!POPCORN leaderboard quick
#!POPCORN gpu cpu
def custom_kernel(xs):
    return [2 * x for x in xs]
