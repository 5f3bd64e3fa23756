def custom_kernel(data):
    return [t.clone() for t in data]
