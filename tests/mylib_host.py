"""A host library never written for GPUs: its function uses Python lists and a generator."""


def slow_norm(x, y):
    parts = [x * x, y * y]
    return sum(p for p in parts) ** 0.5


def uses_norm(x, y):
    return slow_norm(x, y) + 1.0
