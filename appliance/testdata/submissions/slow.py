#!POPCORN leaderboard quick
SLEEP = 3
def custom_kernel(xs):
    return [2 * x for x in xs]
