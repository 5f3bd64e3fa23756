# Correct: a weighted sum of the three channel planes.
def custom_kernel(data):
    r, g, b = data[..., 0], data[..., 1], data[..., 2]
    return (0.2989 * r + 0.5870 * g + 0.1140 * b).contiguous()
