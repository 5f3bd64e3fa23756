def custom_kernel(data):
    a, out = data
    out[...] = a * 2
    return out
