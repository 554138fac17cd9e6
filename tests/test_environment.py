"""The environment every child process gets (kforge_bot.environment): the parent's, minus credentials."""

from __future__ import annotations

import os
from pathlib import Path

from kforge_bot.environment import scrubbed_environment


def test_scrubbed_environment_drops_credentials_and_keeps_the_rest() -> None:
    parent = {
        "PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "CUDA_VISIBLE_DEVICES": "0",
        "OMP_NUM_THREADS": "4", "PYTHONPATH": "/somewhere",
        "GITHUB_TOKEN": "ghp_x", "GH_TOKEN": "x", "OPENAI_API_KEY": "sk-x", "OPENAI_BASE_URL": "http://x",
        "ANTHROPIC_API_KEY": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_REGION": "x", "HF_TOKEN": "x",
        "ACTIONS_RUNTIME_TOKEN": "x", "ACTIONS_ID_TOKEN_REQUEST_URL": "x", "RUNNER_TEMP": "/t",
        "SSH_AUTH_SOCK": "/s", "DB_PASSWORD": "x", "my_secret": "x", "NPM_AUTH": "x", "SESSION_COOKIE": "x",
        "KFORGE_LLM_KEY": "x", "PRIVATE_KEY_PATH": "/k", "GOOGLE_APPLICATION_CREDENTIALS": "/c",
    }
    clean = scrubbed_environment(parent)
    for kept in ("PATH", "HOME", "LANG", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS"):
        assert clean[kept] == parent[kept]
    for name in parent:
        if name not in ("PATH", "HOME", "LANG", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "PYTHONPATH"):
            assert name not in clean, name
    package_root = str(Path(__file__).resolve().parents[1])
    assert clean["PYTHONPATH"].split(os.pathsep) == [package_root, "/somewhere"]
    assert clean["PYTHONUNBUFFERED"] == "1"
