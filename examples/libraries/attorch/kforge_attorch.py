"""PyTorch references and input makers for examples/libraries/attorch/kforge.attorch.yaml (attorch's autograd
Functions checked forward and backward against torch's). Inputs are float32, made on the device the harness
chooses; each reference takes the keyword arguments the manifest gives the entry."""

import torch
import torch.nn.functional as F


def one(rows, cols):
    return (torch.randn(rows, cols),)


def two(rows, cols):
    return torch.randn(rows, cols), torch.randn(rows, cols)


def norm_inputs(rows, cols):
    return torch.randn(rows, cols), torch.randn(cols), torch.randn(cols)


def rms_inputs(rows, cols):
    return torch.randn(rows, cols), torch.randn(cols)


def linear_inputs(rows, features_in, features_out):
    # attorch's weight is [in, out] (the transpose of torch's)
    return (torch.randn(rows, features_in), torch.randn(features_in, features_out) / features_in ** 0.5,
            torch.randn(features_out))


def relu(input, act_func=None, drop_p=0.0, training=False):
    return torch.relu(input)


def gelu_tanh(input, act_func=None, drop_p=0.0, training=False):
    return F.gelu(input, approximate="tanh")


def silu(input, act_func=None, drop_p=0.0, training=False):
    return F.silu(input)


def softmax(input, neg=False, log=False):
    return F.softmax(input, dim=-1)


def log_softmax(input, neg=False, log=True):
    return F.log_softmax(input, dim=-1)


def layer_norm(input, weight, bias, eps=1e-5):
    return F.layer_norm(input, input.shape[-1:], weight, bias, eps)


def rms_norm(input, weight, eps=1e-6):
    return input * torch.rsqrt(input.pow(2).mean(-1, keepdim=True) + eps) * weight


def linear(input, weight, bias, act_func=None):
    return input @ weight + bias


def glu(input, dim=-1, act_func="sigmoid"):
    return F.glu(input, dim=dim)


def mse(input, target, p_loss=2, reduction="mean"):
    return F.mse_loss(input, target, reduction=reduction)
