"""`python -m kforge_bot.doctor measure --target KIND --out FILE`: the child `kforge-bot doctor` runs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kforge_bot.doctor.measure import measure, quick_default
from kforge_bot.kernelspec import TARGET_KINDS

TARGET_CHOICES = ("auto", *TARGET_KINDS)


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kforge_bot.doctor")
    sub = parser.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure", help="measure this machine (the child half of `kforge-bot doctor`)")
    m.add_argument("--target", choices=TARGET_CHOICES, default="auto")
    m.add_argument("--quick", action="store_true", default=quick_default())
    m.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    result = measure(args.target, args.quick)
    Path(args.out).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
