import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = x.max(dim=1, keepdim=True).values
        e = (x - m).exp()
        return e / e.sum(dim=1, keepdim=True)
