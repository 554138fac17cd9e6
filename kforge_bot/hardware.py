"""Hardware facts per runner class, measured ceilings, and roofline arithmetic.

The facts live in `kforge_bot/data/runners/<name>.yml` (shipped as package data; the files under
`hardware_runners/<name>/runner.yml` are links to them, so there is one source of truth). Each fact
carries its source. Measured ceilings written by `kforge-bot doctor --save` override datasheet
peaks for rooflines, because datasheet peaks are not reachable in practice (a large matmul stays well
under its bf16 peak).
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from kforge_bot.config import reader
from kforge_bot.config.yamlcheck import Checker, join
from kforge_bot.errors import KforgeError
from kforge_bot.machine.cache_dirs import ceilings_dir
from kforge_bot.machine.signing import sign, signed_here
from kforge_bot.kernelspec import TARGET_KINDS

# Precisions a peak or a measured ceiling may be given for (int8 is in TOPS).
PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8")

# fact key -> kind of value: str, int, number, str_list, int_list
FACT_KINDS: dict[str, str] = {
    "vendor": "str",
    "architecture": "str",
    "compute_capability": "str",
    "xe_generation": "str",
    "sm_count": "int",
    "xe_cores": "int",
    "vector_engines": "int",
    "matrix_engines": "int",
    "max_clock_mhz": "number",
    "memory_gb": "number",
    "memory_type": "str",
    "memory_bus": "str",
    "memory_bandwidth_gbs": "number",
    "l2_cache_mb": "number",
    "shared_memory_per_block_kb": "number",
    "shared_memory_per_sm_kb": "number",
    "registers_per_sm": "int",
    "max_threads_per_block": "int",
    "warp_size": "int",
    "subgroup_sizes": "int_list",
    "host_interface": "str",
    "matrix_instructions": "str_list",
    "features": "str_list",
}
_FACT_FIELDS = ("value", "source", "unverified", "note")
_TOP_KEYS = ("schema", "name", "title", "target", "labels", "devices", "facts", "reference", "profilers")
_PROFILER_KEYS = ("name", "check", "run", "notes", "source")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_CEILINGS_KIND = "kforge-bot-ceilings"


@dataclass(frozen=True)
class Fact:
    value: Any
    source: str
    unverified: bool = False
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value, "source": self.source}
        if self.unverified:
            out["unverified"] = True
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class Profiler:
    name: str
    check: str
    run: str
    notes: str
    source: str


@dataclass(frozen=True)
class Ceilings:
    """The roofline's two roofs: memory bandwidth (GB/s) and compute (TFLOP/s per precision)."""

    bandwidth_gbs: float | None
    tflops: dict[str, float]
    origin: str  # "measured" (doctor on this machine), "reference" (project measurement) or "datasheet"
    source: str  # where the figures come from, for evidence

    def to_dict(self) -> dict[str, Any]:
        return {"bandwidth_gbs": self.bandwidth_gbs, "tflops": dict(self.tflops),
                "origin": self.origin, "source": self.source}


@dataclass(frozen=True)
class RunnerFacts:
    name: str
    title: str
    target: str
    labels: tuple[str, ...]
    devices: tuple[str, ...]
    facts: dict[str, Fact]
    peak_tflops: dict[str, Fact]
    reference: dict[str, Fact]  # "copy_bandwidth_gbs" and "matmul_tflops.<precision>"
    profilers: tuple[Profiler, ...]
    path: str
    _patterns: tuple[re.Pattern[str], ...] = field(default=(), repr=False, compare=False)

    def get(self, key: str) -> Any | None:
        fact = self.facts.get(key)
        return fact.value if fact is not None else None

    @property
    def is_catch_all(self) -> bool:
        return any(p.pattern in (".*", ".+") for p in self._patterns)

    def matches(self, device_name: str) -> bool:
        return any(p.fullmatch(device_name.strip()) for p in self._patterns)

    def datasheet_ceilings(self) -> Ceilings | None:
        bw = self.facts.get("memory_bandwidth_gbs")
        tflops = {k: float(f.value) for k, f in self.peak_tflops.items()}
        if bw is None and not tflops:
            return None
        return Ceilings(float(bw.value) if bw else None, tflops, "datasheet",
                        f"datasheet figures in runner '{self.name}' ({self.path})")

    def reference_ceilings(self) -> Ceilings | None:
        bw = self.reference.get("copy_bandwidth_gbs")
        tflops = {k.split(".", 1)[1]: float(f.value) for k, f in self.reference.items()
                  if k.startswith("matmul_tflops.")}
        if bw is None and not tflops:
            return None
        return Ceilings(float(bw.value) if bw else None, tflops, "reference",
                        f"project measurement in runner '{self.name}': " + "; ".join(
                            sorted({f.source for f in self.reference.values()})))

    def prompt_text(self) -> str:
        """A compact description of the device for the generator's and analyst's prompts."""
        lines = [f"Device: {self.title} (kforge-bot target '{self.target}', runner '{self.name}')."]
        for key, fact in self.facts.items():
            value = fact.value
            if isinstance(value, list):
                value = "; ".join(str(v) for v in value)
            mark = " (unverified)" if fact.unverified else ""
            lines.append(f"- {key.replace('_', ' ')}: {value}{mark}")
        if self.peak_tflops:
            peaks = ", ".join(f"{k} {f.value:g}{'?' if f.unverified else ''}" for k, f in self.peak_tflops.items())
            lines.append(f"- dense peak TFLOP/s (int8 in TOPS): {peaks}")
        return "\n".join(lines)

    def prompt_facts(self) -> dict[str, Any]:
        """The same facts as a flat mapping ("name" first), for agents that take a dict."""
        out: dict[str, Any] = {"name": self.title, "target": self.target, "runner": self.name}
        out.update({k: f.value for k, f in self.facts.items()})
        out.update({f"peak_tflops_{k}": f.value for k, f in self.peak_tflops.items()})
        unverified = [k for k, f in self.facts.items() if f.unverified]
        unverified += [f"peak_tflops_{k}" for k, f in self.peak_tflops.items() if f.unverified]
        if unverified:
            out["unverified"] = unverified
        return out

    def to_dict(self) -> dict[str, Any]:
        facts: dict[str, Any] = {k: f.to_dict() for k, f in self.facts.items()}
        if self.peak_tflops:
            facts["peak_tflops"] = {k: f.to_dict() for k, f in self.peak_tflops.items()}
        return {
            "name": self.name, "title": self.title, "target": self.target, "labels": list(self.labels),
            "devices": list(self.devices), "facts": facts,
            "reference": {k: f.to_dict() for k, f in self.reference.items()},
            "profilers": [p.__dict__.copy() for p in self.profilers], "path": self.path,
        }


# ---------------------------------------------------------------------------------------------
# Loading runner files


def runners_dir() -> Path:
    """Where the shipped runner facts live (inside the installed package)."""
    return Path(__file__).resolve().parent / "data" / "runners"


def _fact(ck: Checker, raw: Any, key: str, kind: str) -> Fact:
    m = ck.mapping(raw, key, allowed=_FACT_FIELDS, required=("value", "source"))
    v, vkey = m["value"], join(key, "value")
    if kind == "str":
        value: Any = ck.string(v, vkey)
    elif kind == "int":
        value = ck.integer(v, vkey, minimum=1)
    elif kind == "number":
        ck.number(v, vkey, minimum=0, exclusive_minimum=True)
        value = v  # keep 4800 an int in prompts and JSON
    elif kind == "str_list":
        value = ck.string_list(v, vkey, nonempty=True)
    elif kind == "int_list":
        if not isinstance(v, list) or not v:
            ck.expected(vkey, "a non-empty list of integers", v)
        value = [ck.integer(x, join(vkey, i), minimum=1) for i, x in enumerate(v)]
    else:  # pragma: no cover - FACT_KINDS is closed
        raise AssertionError(kind)
    source = ck.string(m["source"], join(key, "source"))
    unverified = ck.boolean(m.get("unverified", False), join(key, "unverified"))
    note = ck.string(m["note"], join(key, "note")) if "note" in m else None
    return Fact(value, source, unverified, note)


def parse_runner(raw: Any, path: str | Path) -> RunnerFacts:
    ck = Checker(path)
    top = ck.mapping(raw, "", allowed=_TOP_KEYS, required=("schema", "name", "title", "target", "labels", "devices", "facts"))
    if top["schema"] != 1:
        ck.expected("schema", "1", top["schema"])
    name = ck.string(top["name"], "name")
    if not _NAME_RE.match(name):
        ck.fail("name", f"expected lowercase letters, digits, '.', '_' or '-', got {name!r}")
    title = ck.string(top["title"], "title")
    target = ck.string(top["target"], "target", choices=TARGET_KINDS)
    labels = tuple(ck.string_list(top["labels"], "labels", nonempty=True))
    devices = tuple(ck.string_list(top["devices"], "devices", nonempty=True))
    patterns = []
    for i, d in enumerate(devices):
        try:
            patterns.append(re.compile(d, re.IGNORECASE))
        except re.error as exc:
            ck.fail(join("devices", i), f"not a valid regular expression ({exc})")

    facts_raw = ck.mapping(top["facts"], "facts", allowed=[*FACT_KINDS, "peak_tflops"])
    facts: dict[str, Fact] = {}
    peaks: dict[str, Fact] = {}
    for key, value in facts_raw.items():
        if key == "peak_tflops":
            for prec, pv in ck.mapping(value, "facts.peak_tflops", allowed=PRECISIONS).items():
                peaks[prec] = _fact(ck, pv, f"facts.peak_tflops.{prec}", "number")
        else:
            facts[key] = _fact(ck, value, f"facts.{key}", FACT_KINDS[key])

    reference: dict[str, Fact] = {}
    ref_raw = ck.mapping(top.get("reference") or {}, "reference", allowed=("copy_bandwidth_gbs", "matmul_tflops"))
    if "copy_bandwidth_gbs" in ref_raw:
        reference["copy_bandwidth_gbs"] = _fact(ck, ref_raw["copy_bandwidth_gbs"], "reference.copy_bandwidth_gbs", "number")
    if "matmul_tflops" in ref_raw:
        for prec, pv in ck.mapping(ref_raw["matmul_tflops"], "reference.matmul_tflops", allowed=PRECISIONS).items():
            reference[f"matmul_tflops.{prec}"] = _fact(ck, pv, f"reference.matmul_tflops.{prec}", "number")

    profilers = []
    prof_raw = top.get("profilers", [])
    if not isinstance(prof_raw, list):
        ck.expected("profilers", "a list", prof_raw)
    for i, p in enumerate(prof_raw):
        key = join("profilers", i)
        pm = ck.mapping(p, key, allowed=_PROFILER_KEYS, required=("name", "run", "source"))
        profilers.append(Profiler(
            name=ck.string(pm["name"], join(key, "name")),
            check=ck.string(pm["check"], join(key, "check")) if "check" in pm else "",
            run=ck.string(pm["run"], join(key, "run")),
            notes=ck.string(pm["notes"], join(key, "notes")) if "notes" in pm else "",
            source=ck.string(pm["source"], join(key, "source")),
        ))
    return RunnerFacts(name, title, target, labels, devices, facts, peaks, reference, tuple(profilers),
                       str(path), tuple(patterns))


def load_runner(path: str | Path) -> RunnerFacts:
    """Read and validate one runner file; a malformed one raises KforgeError naming file and key."""
    runner = parse_runner(reader.read_yaml(path), path)
    stem = Path(path).stem
    if stem not in (runner.name, "runner"):
        raise KforgeError(f"name: '{runner.name}' does not match the file name '{stem}'", path=path,
                          hint=f"rename the file to {runner.name}.yml or fix `name`")
    return runner


@lru_cache(maxsize=None)
def _load_dir(directory: str) -> dict[str, RunnerFacts]:
    out: dict[str, RunnerFacts] = {}
    for p in sorted(Path(directory).glob("*.yml")):
        r = load_runner(p)
        out[r.name] = r
    return out


def all_runners(directory: str | Path | None = None) -> dict[str, RunnerFacts]:
    """Every runner class, by name (the shipped ones unless another directory is given)."""
    return dict(_load_dir(str(Path(directory) if directory else runners_dir())))


def get_runner(name: str) -> RunnerFacts:
    runners = all_runners()
    if name not in runners:
        raise KforgeError(f"unknown hardware runner '{name}'", hint="known: " + ", ".join(sorted(runners)))
    return runners[name]


def facts_for(target_kind: str, device_name: str, directory: str | Path | None = None) -> RunnerFacts | None:
    """The runner class describing this device ("NVIDIA H200" -> h200), or None if none does.

    A runner naming the device beats a catch-all one (the cpu runner matches any CPU).
    """
    candidates = [r for r in all_runners(directory).values() if r.target == target_kind and r.matches(device_name)]
    candidates.sort(key=lambda r: (r.is_catch_all, r.name))
    return candidates[0] if candidates else None


# ---------------------------------------------------------------------------------------------
# Measured ceilings


def fingerprint(target_kind: str, device_name: str) -> str:
    """A file-name-safe id of a machine class: 'cuda-nvidia-h200'."""
    slug = re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-")[:80] or "unknown"
    return f"{target_kind}-{slug}"


def ceilings_path(target_kind: str, device_name: str) -> Path:
    return ceilings_dir() / f"{fingerprint(target_kind, device_name)}.json"


def _ceilings_from_mapping(data: Any, path: str | Path) -> tuple[Ceilings, dict[str, Any]]:
    ck = Checker(path)
    top = ck.mapping(data, "")
    block = top.get("ceilings", top)  # a full doctor report carries them under "ceilings"
    key = "ceilings" if "ceilings" in top else ""
    m = ck.mapping(block, key)
    if m.get("kind") != _CEILINGS_KIND:
        ck.fail(join(key, "kind"), f"expected '{_CEILINGS_KIND}', got {m.get('kind')!r}",
                hint="pass a file written by `kforge-bot doctor --save` or `--json`")
    bw_raw = m.get("bandwidth_gbs")
    bw = None if bw_raw is None else ck.number(bw_raw, join(key, "bandwidth_gbs"), minimum=0, exclusive_minimum=True)
    tf_raw = ck.mapping(m.get("tflops") or {}, join(key, "tflops"), allowed=PRECISIONS)
    tflops = {p: ck.number(v, join(key, f"tflops.{p}"), minimum=0, exclusive_minimum=True) for p, v in tf_raw.items()}
    if bw is None and not tflops:
        ck.fail(key or "ceilings", "holds no measured figure (bandwidth_gbs and tflops are both empty)")
    when = m.get("measured_at", "an unknown date")
    device = m.get("device_name", "an unknown device")
    ceil = Ceilings(bw, tflops, "measured", f"kforge-bot doctor on {device}, {when} ({path})")
    return ceil, m


def load_ceilings(path: str | Path) -> Ceilings:
    """Measured ceilings from a `doctor --save` file or a full `doctor --json` report."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise KforgeError("ceilings file not found", path=p, hint="run `kforge-bot doctor --save` on this machine") from None
    except (OSError, ValueError) as exc:
        raise KforgeError(f"not a readable JSON ceilings file ({exc})", path=p) from None
    return _ceilings_from_mapping(data, p)[0]


def ceilings_record(target_kind: str, device_name: str, bandwidth_gbs: float | None,
                    tflops: Mapping[str, float], measured_at: str, method: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON object `doctor --save` writes (and `doctor --json` embeds under "ceilings")."""
    return {
        "kind": _CEILINGS_KIND, "version": 1, "target": target_kind, "device_name": device_name,
        "fingerprint": fingerprint(target_kind, device_name), "measured_at": measured_at,
        "bandwidth_gbs": bandwidth_gbs, "tflops": dict(tflops), "method": dict(method),
    }


SIGNATURE_KEY = "signature"  # this machine's signature of a saved ceilings record (machine.signing.sign)
_unsigned_noted: set[Path] = set()  # files already noted as ignored: one note each per process


def save_ceilings(record: Mapping[str, Any], path: str | Path | None = None) -> Path:
    """Write a ceilings record where `ceilings_for` finds it, signed by this machine (or to `path`, as it is);
    returns the path."""
    _ceilings_from_mapping(dict(record), path or "<ceilings record>")  # never write what we cannot read
    target = Path(path) if path else ceilings_path(record["target"], record["device_name"])
    written = dict(record) if path else {**record, SIGNATURE_KEY: sign(record)}
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(written, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(target)
    return target


def ceilings_for(target_kind: str, device_name: str, override: str | Path | None = None) -> Ceilings | None:
    """The roofline for this device: an explicit file, else this machine's saved doctor
    measurement, else the runner's datasheet figures, else None."""
    if override is not None:
        return load_ceilings(override)
    saved = ceilings_path(target_kind, device_name)
    if saved.is_file():
        measured = _signed_ceilings(saved)
        if measured is not None:
            return measured
    runner = facts_for(target_kind, device_name)
    return runner.datasheet_ceilings() if runner else None


def _signed_ceilings(path: Path) -> Ceilings | None:
    """The saved measurement, if this machine wrote it. Ceilings bound the fastest time a kernel may report, so a
    file planted in the cache folder (restored from a shared cache, or committed where a workflow points
    $KFORGE_CACHE_DIR into a checkout) must not raise them: an unsigned or foreign one is ignored, with a note."""
    try:  # through the reader: a planted link (to /dev/zero), FIFO or huge file is ignored, never read or waited on
        data = json.loads(reader.read_text(path, path.parent, limit=reader.MAX_SOURCE_BYTES))
    except (KforgeError, ValueError):
        data = None
    record = {k: v for k, v in data.items() if k != SIGNATURE_KEY} if isinstance(data, dict) else None
    if record is not None and signed_here(record, data.get(SIGNATURE_KEY)):
        return _ceilings_from_mapping(record, path)[0]
    if path not in _unsigned_noted:
        _unsigned_noted.add(path)
        print(f"kforge-bot: note: {path}: ignored: not a ceilings file this machine's `kforge-bot doctor --save` "
              "signed (run it again here)", file=sys.stderr)
    return None


# ---------------------------------------------------------------------------------------------
# Roofline


def roofline(bytes_moved: float, flops: float, seconds: float, ceilings: Ceilings | None,
             precision: str = "fp32") -> dict[str, Any]:
    """Where a kernel run sits on the roofline.

    bound is "memory" when the kernel's arithmetic intensity (FLOP per byte) is below the ridge
    point (peak FLOP/s / peak bytes/s), "compute" above it, "unknown" without both roofs.
    roofline_fraction is achieved FLOP/s over the attainable FLOP/s at that intensity (for a
    kernel doing no arithmetic: achieved over peak bandwidth).
    """
    if seconds <= 0 or not math.isfinite(seconds):
        raise ValueError(f"seconds must be a positive number, got {seconds!r}")
    if bytes_moved < 0 or flops < 0:
        raise ValueError("bytes_moved and flops must not be negative")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    achieved_gbs = bytes_moved / seconds / 1e9
    achieved_tflops = flops / seconds / 1e12
    intensity = flops / bytes_moved if bytes_moved > 0 else None
    bw = ceilings.bandwidth_gbs if ceilings else None
    peak = ceilings.tflops.get(precision) if ceilings else None
    ridge = (peak * 1e12) / (bw * 1e9) if (bw and peak) else None

    bound = "unknown"
    if flops == 0 and bytes_moved > 0:
        bound = "memory"
    elif bytes_moved == 0 and flops > 0:
        bound = "compute"
    elif ridge is not None and intensity is not None:
        bound = "memory" if intensity < ridge else "compute"

    bw_frac = achieved_gbs / bw if bw else None
    compute_frac = achieved_tflops / peak if peak else None
    if bound == "memory" and flops == 0:
        roof_frac = bw_frac
    elif bound == "compute" and bytes_moved == 0:
        roof_frac = compute_frac
    elif ridge is not None and intensity is not None and peak and bw:
        attainable = min(peak, intensity * bw / 1e3)  # TFLOP/s: intensity [FLOP/B] * GB/s / 1e3
        roof_frac = achieved_tflops / attainable if attainable > 0 else None
    else:
        roof_frac = bw_frac if bound == "memory" else compute_frac if bound == "compute" else None

    return {
        "seconds": seconds, "bytes_moved": bytes_moved, "flops": flops, "precision": precision,
        "achieved_gbs": achieved_gbs, "achieved_tflops": achieved_tflops,
        "arithmetic_intensity": intensity, "ridge_intensity": ridge,
        "bandwidth_fraction": bw_frac, "compute_fraction": compute_frac,
        "roofline_fraction": roof_frac, "bound": bound,
        "ceilings": None if ceilings is None else {
            "bandwidth_gbs": bw, "tflops": peak, "origin": ceilings.origin, "source": ceilings.source},
    }
