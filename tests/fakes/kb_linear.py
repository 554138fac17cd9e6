"""A KernelBench problem whose weights come from its constructor's argument, a module-level size (`dim`): a held-out
variant of `dim` builds every side again with other weights. Shared by the shipped-inputs tests (issue 38)."""

LINEAR_PROBLEM = """\
import torch
import torch.nn as nn

batch_size = 8
dim = 64


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
"""

MARKED_LINEAR_PROBLEM = LINEAR_PROBLEM.replace("import torch\n", "import os\n\nimport torch\n", 1).replace(
    "batch_size = 8", "os.environ['KFORGE_TEST_BASE_LOADED'] = 'here'  # marks the process it is imported in\n"
    "batch_size = 8")
