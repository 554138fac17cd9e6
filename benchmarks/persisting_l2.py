"""What a persisting-L2 carveout does to a call's time across samples on this GPU, and what the settle's reset costs.

    python benchmarks/persisting_l2.py [--op sum|sum64] [--mib 8] [--samples 200]

The reference of tests/data/gpu/sum_problem.py (x.sum()) or sum64_problem.py (x.to(float64).sum()), x of --mib MiB,
timed by CUDA events, in three blocks of samples, each block after the harness's settle (so none inherits another's
L2 state): plain (the harness's settle, no window); its input marked persisting in the largest carveout
(gpu-mode/pygpubench#49) with the flush alone before each sample (the settle before the reset); and the same with
the harness's settle (CudaTarget.settle, which demotes persisting lines first). Prints the medians and the reset's
host cost.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import time

import torch

from kforge_bot.targets import cuda as cuda_target
from kforge_bot.targets import make_target

_driver = ctypes.CDLL("libcuda.so.1")
_driver.cuCtxSetLimit.argtypes = [ctypes.c_int, ctypes.c_size_t]
_driver.cuStreamSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]


class _Window(ctypes.Structure):
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hitRatio", ctypes.c_float),
                ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int)]


class _Value(ctypes.Union):
    _fields_ = [("window", _Window), ("pad", ctypes.c_char * 64)]


def device_attribute(code: int) -> int:
    value, device = ctypes.c_int(), ctypes.c_int()
    _driver.cuCtxGetDevice(ctypes.byref(device))
    _driver.cuDeviceGetAttribute(ctypes.byref(value), code, device)
    return value.value


def persist(x: torch.Tensor, on: bool, carveout: int) -> None:
    """Reserve the carveout and mark x persisting (on), or clear the stream's window (off); a refusal stops."""
    if on and (code := _driver.cuCtxSetLimit(0x06, carveout)) != 0:
        raise SystemExit(f"cuCtxSetLimit(persisting L2, {carveout}) refused: CUresult {code}")
    value = _Value()
    value.window = _Window(x.data_ptr(), x.numel() * x.element_size() if on else 0, 1.0 if on else 0.0,
                           2 if on else 0, 0)
    code = _driver.cuStreamSetAttribute(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), 1,
                                        ctypes.byref(value))
    if code != 0:
        raise SystemExit(f"cuStreamSetAttribute(access policy window) refused: CUresult {code}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=8)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--op", choices=("sum", "sum64"), default="sum",
                        help="sum: x.sum() (reads x once); sum64: x.to(float64).sum() (vectorsum's reference)")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    target = make_target("cuda")
    x = torch.randn(args.mib << 18, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def flush_only() -> None:  # the settle without the reset: the device idle, then the flush
        torch.cuda.synchronize()
        for _ in range(12):
            target.flush_cache()

    # CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, _MAX_ACCESS_POLICY_WINDOW_SIZE
    carveout, window = device_attribute(108), device_attribute(109)
    print(f"max persisting L2 {carveout / 2**20:.1f} MiB, max access-policy window {window / 2**20:.1f} MiB")

    def sample(settle, on: bool) -> float:
        persist(x, on, carveout)
        settle()
        start.record()
        (x.sum() if args.op == "sum" else x.to(torch.float64).sum())
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0

    ways = {"plain": (target.settle, False), "persisting, flush only": (flush_only, True),
            "persisting, harness settle": (target.settle, True)}
    times: dict[str, list[float]] = {}
    for name, (settle, on) in ways.items():  # in blocks: a persisting line can only help the samples after it
        persist(x, False, carveout)
        target.settle()
        for _ in range(10):
            sample(settle, on)
        times[name] = [sample(settle, on) for _ in range(args.samples)]
    persist(x, False, carveout)
    reset = getattr(cuda_target, "_reset_persisting_l2", None)  # absent before the fix
    cost = []
    if reset is not None:
        for _ in range(200):
            t0 = time.perf_counter()
            reset()
            cost.append((time.perf_counter() - t0) * 1e6)
    report = {"device": torch.cuda.get_device_name(), "op": args.op, "mib": args.mib, "max_persisting_l2": carveout,
              "max_window": window, "samples": args.samples,
              "median_us": {name: statistics.median(v) for name, v in times.items()},
              "reset_bound": reset is not None, "reset_works": bool(reset and reset()),
              "reset_host_us_median": statistics.median(cost) if cost else None,
              "l2_bytes": torch.cuda.get_device_properties(0).L2_cache_size}
    plain = report["median_us"]["plain"]
    for name, median in report["median_us"].items():
        print(f"{name}: {median:.2f} us ({plain / median:.3f}x of plain)")
    print(f"reset: bound {report['reset_bound']}, works {report['reset_works']}, "
          f"host cost {report['reset_host_us_median']} us (median)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=1)


if __name__ == "__main__":
    main()
