"""A stand-in `ncu` for CPU tests: it runs the profiled program as the real one does (everything from the
Python executable on), then prints what it is told to, e.g. output recorded from ncu on an H200."""

from __future__ import annotations

import shutil
import stat
import sys
from pathlib import Path

RECORDED = Path(__file__).resolve().parents[1] / "data" / "ncu" / "raw_h200_scale_softmax.csv"


def fake_ncu(folder: Path, after: str, before: str = "") -> Path:
    """A `ncu` that runs the program it is given (everything from the Python executable on), then `after`."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(RECORDED, folder / "recorded.csv")
    script = folder / "ncu"
    script.write_text(f"""#!{sys.executable}
import subprocess, sys, time
args = sys.argv[1:]
{before}
program = args[args.index({sys.executable!r}):]
subprocess.run(program)
{after}
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    folder.chmod(0o755)
    return script


def printing_the_recording(folder: Path) -> Path:
    """A stand-in that prints the recorded H200 output after the program."""
    return fake_ncu(folder, f"print(open({str(folder / 'recorded.csv')!r}).read())")
