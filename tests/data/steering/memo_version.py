"""Issue 38's attack 3.2: a softmax that does its work three times (about 3x slower) but memoizes its answer by
input tensor object and version counter. The correctness checks and the checks after timing write the inputs in
place (a new version) and get fresh answers; timed repeats on the same input tensors used to hit the memo."""

import torch
import torch.nn as nn

_memo: dict = {}


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = (id(x), x._version)
        hit = _memo.get(key)
        if hit is not None and hit[0] is x:
            return hit[1].clone()
        for _ in range(3):
            e = (x - x.amax(dim=1, keepdim=True)).exp()
            out = e / e.sum(dim=1, keepdim=True)
        _memo[key] = (x, out.clone())
        return out
