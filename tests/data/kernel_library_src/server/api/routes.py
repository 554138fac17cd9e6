"""A web application's backend beside the library, in a package of its own: it mentions no kernel, so init never
parses it (its launcher-looking function is not the library's)."""


def render(x):
    return x


INSTALL = ["pip", "install", "triton"]  # names triton, holds no kernel: still never parsed
