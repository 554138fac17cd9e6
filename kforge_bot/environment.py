"""The environment every child process gets: the parent's, minus anything that could be a credential.

A leaf (the sandbox, the result cache's device probe, the profilers and the doctor all start children with it),
so the leaves that start a process need not import the harness."""

from __future__ import annotations

import os
import re
from pathlib import Path

SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH|COOKIE|SESSION)",
                         re.IGNORECASE)
SECRET_PREFIXES = ("GITHUB_", "ACTIONS_", "OPENAI_", "ANTHROPIC_", "AWS_", "AZURE_", "GOOGLE_", "GH_", "HF_",
                   "HUGGING_FACE_", "RUNNER_", "KFORGE_LLM_", "SSH_")


def scrubbed_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The parent's environment minus anything that could be a credential."""
    source = dict(os.environ if environ is None else environ)
    clean = {k: v for k, v in source.items() if not SECRET_NAME.search(k) and not k.startswith(SECRET_PREFIXES)}
    clean["PYTHONUNBUFFERED"] = "1"
    clean["PYTHONDONTWRITEBYTECODE"] = "1"
    # The worker must import this kforge_bot even when it is not installed (tests, a checkout).
    package_root = str(Path(__file__).resolve().parents[1])
    clean["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, clean.get("PYTHONPATH", "")) if p)
    return clean
