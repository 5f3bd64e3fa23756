#!POPCORN leaderboard quick
FAIL_SECRET = True
def custom_kernel(xs):
    return [2 * x for x in xs]
