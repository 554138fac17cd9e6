"""The generator's reply, read (kforge_bot.agents.reply_parser): one block of the right language, or feedback."""

from __future__ import annotations

import pytest
from test_generator import BASELINE, GOOD, fenced

from kforge_bot.agents.reply_parser import extract_source
from kforge_bot.errors import MalformedReply


def test_extract_one_python_block_among_prose_and_other_languages():
    text = (
        "The row is 4096 wide, so 8 warps keep more loads in flight.\n\n"
        "```bash\npython bench.py\n```\n\n" + fenced(GOOD) + "\n\nThis should reach the copy bandwidth."
    )
    assert extract_source(text, "triton", "softmax", filename="triton/softmax.py") == GOOD


def test_extract_accepts_one_untagged_block_and_tag_variants():
    assert extract_source("```\n" + GOOD + "```", "triton", "softmax") == GOOD
    assert extract_source("```py\n" + GOOD + "```", "triton", "softmax") == GOOD
    assert extract_source("~~~python\n" + GOOD + "~~~", "triton", "softmax") == GOOD


def test_zero_blocks():
    with pytest.raises(MalformedReply) as info:
        extract_source("I would raise num_warps to 8.", "triton", "softmax", filename="triton/softmax.py")
    assert "no fenced code block" in info.value.feedback and "```python" in info.value.feedback and "softmax.py" in info.value.feedback


def test_wrong_language_only():
    with pytest.raises(MalformedReply, match=r"no ```python block \(found ```cuda\)"):
        extract_source(fenced("__global__ void k() {}\n", "cuda"), "triton", "softmax", filename="k.py")


def test_several_blocks():
    with pytest.raises(MalformedReply) as info:
        extract_source("Option A:\n" + fenced(GOOD) + "\nOption B:\n" + fenced(BASELINE), "triton", "softmax")
    assert "2 ```python blocks (at lines 2, " in info.value.feedback and "exactly one block" in info.value.feedback


def test_empty_block():
    with pytest.raises(MalformedReply, match="was empty"):
        extract_source("```python\n\n```", "triton", "softmax")
    with pytest.raises(MalformedReply, match="reply was empty"):
        extract_source("   ", "triton", "softmax")


def test_missing_entry_symbol():
    renamed = GOOD.replace("def softmax(x):", "def softmax_fast(x):")
    with pytest.raises(MalformedReply, match="does not define `softmax` at module level"):
        extract_source(fenced(renamed), "triton", "softmax", filename="triton/softmax.py")
    # defined under a guard or imported counts as defined
    guarded = "try:\n    import triton\nexcept ImportError:\n    triton = None\nif triton:\n    def softmax(x):\n        return x\n"
    assert extract_source(fenced(guarded), "triton", "softmax") == guarded
    assert extract_source(fenced("from ._impl import softmax\n"), "triton", "softmax")
    assert extract_source(fenced("class ModelNew:\n    pass\n"), "torch", "ModelNew")


def test_syntax_error_is_caught_before_evaluation():
    with pytest.raises(MalformedReply, match=r"not valid Python: .* line 2: `def softmax\(x\)`"):
        extract_source(fenced("import torch\ndef softmax(x)\n    return x\n"), "triton", "softmax")


def test_truncated_reply():
    cut = "```python\n" + GOOD[:200]
    with pytest.raises(MalformedReply, match="cut off at the length limit"):
        extract_source(cut, "triton", "softmax", truncated=True)
    with pytest.raises(MalformedReply, match="never closed"):
        extract_source(cut, "triton", "softmax")


def test_c_and_cuda_files():
    cu = "#include <cuda_runtime.h>\n__global__ void stencil(const float* in, float* out, long n) { }\n"
    assert extract_source(fenced(cu, "cuda"), "cuda", "stencil", filename="csrc/stencil.cu") == cu
    assert extract_source(fenced(cu, "cpp"), "cuda", "stencil", filename="csrc/stencil.cu") == cu
    with pytest.raises(MalformedReply, match="does not define `launch_stencil`"):
        extract_source(fenced(cu, "cuda"), "cuda", "launch_stencil", filename="csrc/stencil.cu")
    c = "void blur_rows(const float* in, float* out, int rows, int cols) {}\n"
    assert extract_source(fenced(c, "c"), "c", "blur_rows", filename="src/blur.c") == c
