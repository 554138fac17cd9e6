"""2 x instead of 3 x: the problem's lax check_implementation is satisfied, the harness's comparison is not."""


def custom_kernel(data):
    return data * 2
