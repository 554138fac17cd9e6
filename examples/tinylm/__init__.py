"""tinylm: a small decoder-only transformer in plain PyTorch whose RMSNorm, SwiGLU and softmax come from a kernels
module (the bundled Triton kernels, or their eager PyTorch versions), with random weights from a fixed seed."""
