# Wrong: returns this rank's own vector, as if it were alone.
def custom_kernel(data):
    return data.clone()
