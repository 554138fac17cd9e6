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


def test_only_the_named_variables_reach_a_child() -> None:
    """An allowlist (issue 38): a runner's secrets under names no denylist knows never reach a worker; what a
    worker needs (its device, toolchains, caches, locale, the harness's own settings) does."""
    needed = {"CUDA_VISIBLE_DEVICES": "1", "TRITON_CACHE_DIR": "/c/t", "TORCH_EXTENSIONS_DIR": "/c/e",
              "TORCHINDUCTOR_CACHE_DIR": "/c/i", "LC_ALL": "C.UTF-8", "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
              "CUDA_HOME": "/usr/local/cuda", "ZE_AFFINITY_MASK": "0", "KFORGE_MEMORY_BUDGET": "8G", "USER": "ci"}
    runner_secrets = {"PIP_INDEX_URL": "https://u:tok@pypi.example/simple", "SLACK_WEBHOOK_URL": "https://hooks/x",
                      "SENTRY_DSN": "https://k@sentry.example/1", "DATABASE_URL": "postgres://u:p@db/x",
                      "KAGGLE_KEY": "k", "KAGGLE_USERNAME": "u", "NPM_CONFIG_REGISTRY": "https://r",
                      "KFORGE_CACHE_SECRET": "s", "KFORGE_LLM_API_KEY": "s", "TORCH_HUB_TOKEN": "s",
                      "CI_JOB_JWT": "j", "DOCKER_CONFIG": "/d", "http_proxy": "http://u:p@proxy"}
    clean = scrubbed_environment({**needed, **runner_secrets})
    for name, value in needed.items():
        assert clean[name] == value, name
    leaked = sorted(set(runner_secrets) & set(clean))
    assert not leaked, leaked
