# Wrong: zeroes its inputs and returns zeros (a check against the mutated
# input would pass).
def custom_kernel(data):
    a, b = data
    a.zero_()
    b.zero_()
    return a + b
