"""A stand-in `unitrace` for CPU tests: it runs the profiled program as the real one does (everything from the
Python executable on), then writes its metric-query file where unitrace would (`--output-dir-path`, with the
pid in the name: `<name>.<pid>.csv`), from tests/data/unitrace (format only, not a recording)."""

from __future__ import annotations

import shutil
import stat
import sys
from pathlib import Path

FORMAT_SAMPLE = Path(__file__).resolve().parents[1] / "data" / "unitrace" / "perfquery_format.csv"


def fake_unitrace(folder: Path, write_file: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(FORMAT_SAMPLE, folder / "sample.csv")
    script = folder / "unitrace"
    script.write_text(f"""#!{sys.executable}
import os, subprocess, sys
args = sys.argv[1:]
program = args[args.index({sys.executable!r}):]
out_dir, name = args[args.index("--output-dir-path") + 1], args[args.index("-o") + 1]
subprocess.run(program)
if {write_file!r}:
    stem, ext = os.path.splitext(name)
    with open(os.path.join(out_dir, f"{{stem}}.{{os.getpid()}}{{ext}}"), "w") as out:
        out.write(open({str(folder / 'sample.csv')!r}).read())
else:
    print("[ERROR] Unable to find metric group ComputeBasic")
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    folder.chmod(0o755)
    return script
