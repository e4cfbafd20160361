OFFSET = 0.25


def far(v):
    return v + OFFSET
