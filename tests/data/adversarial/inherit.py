"""Hack 4: inherit the reference and do nothing of its own."""

from problem import Model


class ModelNew(Model):
    pass
