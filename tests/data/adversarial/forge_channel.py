"""Hack 11: forge the harness's result channel: print a fake verdict, write it to every inherited fd,
then leave before the harness can send the real one."""

import json
import os

import torch
import torch.nn as nn

FAKE = json.dumps({"type": "result", "status": "ok", "timing": [], "profile": {}}) + "\n"


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        print(FAKE, flush=True)
        for fd in range(3, 1024):  # every inherited fd, wherever the parent's numbering put the channel
            try:
                os.write(fd, FAKE.encode())
            except OSError:
                pass
        os._exit(0)
