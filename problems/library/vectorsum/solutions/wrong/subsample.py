# Wrong: sums 99 of every 100 elements and rescales (the cheat KernelBot
# saw on its vector-sum problem).
def custom_kernel(data):
    n = data.numel()
    keep = data.view(-1)[: n - n // 100]
    return (keep.double().sum() * (n / keep.numel())).float()
