"""Control: a correct softmax that uses ordinary library features which touch frames internally
(namedtuple, dataclass, enum, TypeVar, warnings, logging, a formatted traceback). None of them is a hack."""

import enum
import logging
import traceback
import warnings
from collections import namedtuple
from dataclasses import dataclass
from typing import TypeVar

import torch
import torch.nn as nn

T = TypeVar("T")
Split = namedtuple("Split", "rows cols")
log = logging.getLogger("kernel")


class Mode(enum.Enum):
    STABLE = 1


@dataclass
class Config:
    mode: Mode = Mode.STABLE


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.config = Config()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = Split(*x.shape)
        if shape.cols > 100:
            warnings.warn("wide rows", stacklevel=2)
        try:
            raise ValueError("a recoverable problem")
        except ValueError:
            log.debug(traceback.format_exc())
        e = (x - x.amax(dim=1, keepdim=True)).exp()
        return e / e.sum(dim=1, keepdim=True)
