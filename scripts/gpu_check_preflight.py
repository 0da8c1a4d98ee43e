"""Preflight of ``scripts/gpu_check.py``: before anything heavy is imported, name every package
the check needs that is missing or too old, each with its fix, and the families this
transformers cannot build.

Standard library only, so it runs on a bare node's ``python3``. The packages are those the check
imports: the GPU image's (:data:`IMAGE`) and the wheel bundle's (``scripts/gpu_check_wheels.txt``,
fetched here by ``scripts/gpu_wheels.sh``). The families are the configs in
``scripts/gpu_configs/`` (one per family module, named after it), each with the transformers module
of the class it builds, read off the family's own declaration (:func:`family_modules`, through the
registry's ``ast`` reading: nothing of the family is imported). Exit status 0 when the check can
run, 1 otherwise.

Usage: ``python3 scripts/gpu_check_preflight.py [--families a,b] [--json]``
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WHEELS = HERE / "gpu_check_wheels.txt"
CONFIGS = HERE / "gpu_configs"
#: the one command that installs the bundle on the node and runs the check (from the repo root)
INSTALL = (
    "python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "
    ".whl/*.whl && PYTHONPATH=/tmp/site PYTHON=python3 bash scripts/gpu_check.sh"
)
BUNDLE_FIX = f"bash scripts/gpu_wheels.sh here (writes .whl/), carry .whl to the node, then there: {INSTALL}"
MIN_PYTHON = (3, 11)


class Need(NamedTuple):
    module: str  # what the check imports
    dist: str  # the distribution that provides it
    minimum: str  # the oldest version the check was written for
    source: str  # "image" or "bundle"


#: what the GPU image provides and the check imports (torchvision: the transformers video
#: processors; jinja2: chat templates; pillow/numpy: frames; tokenizers: the check's tokenizer)
IMAGE: tuple[Need, ...] = (
    Need("torch", "torch", "2.11", "image"),
    Need("torchvision", "torchvision", "0.26", "image"),
    Need("transformers", "transformers", "5.17", "image"),
    Need("tokenizers", "tokenizers", "0.22", "image"),
    Need("safetensors", "safetensors", "0.4", "image"),
    Need("huggingface_hub", "huggingface-hub", "1.0", "image"),
    Need("numpy", "numpy", "1.26", "image"),
    Need("PIL", "pillow", "10.0", "image"),
    Need("jinja2", "jinja2", "3.1", "image"),
    Need("requests", "requests", "2.0", "image"),
    Need("packaging", "packaging", "23.0", "image"),
    Need("tqdm", "tqdm", "4.60", "image"),
    Need("yaml", "pyyaml", "6.0", "image"),
)

#: the GPU image's Python distributions ('cuda' image, as last read on a node on 2026-11-17): what
#: the node has besides the bundle (tests/model_adapters/test_gpu_check.py checks that every
#: package the check imports is here or in the bundle)
GPU_IMAGE_DISTS = frozenset(
    """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build
    certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
    cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
    flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
    huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt
    jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities
    linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes
    mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba
    numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
    nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse
    nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx
    onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix
    orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client
    propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions
    pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil
    pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
    scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six
    sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl
    tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics
    torchvision tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop
    wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp""".split()
)


class Family(NamedTuple):
    """A family the check builds: its adapter id, the checkpoint ``model_type`` of the class it
    builds, the transformers module that holds that class, and the class."""

    model_id: str
    model_type: str
    module: str
    cls: str


def family_modules() -> dict[str, Family]:
    """Config name (``scripts/gpu_configs/<name>.json``, the family module's name) -> the family:
    its id and its checkpoint classes from the family module's declaration (the registry reads it
    with ``ast``, standard library only), the config's ``class`` among them."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from naru_eval.adapters.registry import registered

    by_module = {r.name: r for r in registered().values()}
    out = {}
    for path in sorted(CONFIGS.glob("*.json")):
        cls = json.loads(path.read_text(encoding="utf-8"))["class"]
        reg = by_module.get(path.stem)
        if reg is None:
            raise SystemExit(f"preflight: {path.name} names no family module (model_adapters/{path.stem}.py)")
        types = [t for t, c in reg.checkpoints.items() if c == cls]
        if not types:
            raise SystemExit(f"preflight: {path.name} builds {cls}, which {reg.id} does not load ({reg.checkpoints})")
        out[path.stem] = Family(reg.id, types[0], f"transformers.models.{types[0]}", cls)
    return out


def bundle() -> tuple[Need, ...]:
    """The wheel bundle's packages (``gpu_check_wheels.txt``: ``dist==version  module``)."""
    out = []
    for line in WHEELS.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            pin, module = line.split()
            dist, version = pin.split("==")
            out.append(Need(module, dist, version, "bundle"))
    return tuple(out)


def version_tuple(v: str) -> tuple[int, ...]:
    """``2.11.0+cu130`` -> (2, 11, 0): the leading numbers (enough to order releases)."""
    return tuple(int(x) for x in re.findall(r"\d+", v.split("+")[0])[:3])


def installed(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def problems(needs: tuple[Need, ...]) -> list[str]:
    """One line per missing or too-old package, with its fix."""
    out = []
    for n in needs:
        found = importlib.util.find_spec(n.module) is not None
        have = installed(n.dist) if found else None
        fix = BUNDLE_FIX if n.source == "bundle" else f"pip install '{n.dist}>={n.minimum}' (the GPU image has it)"
        if not found:
            out.append(f"missing: {n.dist} (import {n.module}) -> {fix}")
        elif have is not None and version_tuple(have) < version_tuple(n.minimum):
            out.append(f"too old: {n.dist} {have} < {n.minimum} -> {fix}")
    return out


def family_gaps(families: list[str]) -> dict[str, str]:
    """family -> why this transformers cannot build it (the check skips it and says so)."""
    gaps = {}
    if importlib.util.find_spec("transformers") is None:
        return {f: "transformers is missing" for f in families}
    have = installed("transformers") or "?"
    known = family_modules()
    for f in families:
        fam = known.get(f)
        module, cls = (fam.module, fam.cls) if fam else ("", "")
        if not module:
            gaps[f] = f"unknown family {f!r} (known: {', '.join(known)})"
        else:
            why = f"transformers {have} has no {cls} ({module}): a newer transformers has it"
            try:  # imports the transformers package itself (lazily: no model code)
                present = importlib.util.find_spec(module) is not None
            except ModuleNotFoundError:  # not even transformers.models: absent all the same
                present = False
            except Exception as e:  # a broken transformers: say so instead of a traceback
                present, why = False, f"transformers {have} fails to import: {type(e).__name__}: {e}"
            if not present:
                gaps[f] = why
    return gaps


def report(families: list[str]) -> dict[str, object]:
    lines = []
    if sys.version_info[:2] < MIN_PYTHON:
        lines.append(f"too old: python {sys.version.split()[0]} < {'.'.join(map(str, MIN_PYTHON))}")
    lines += problems(IMAGE + bundle())
    return {"python": sys.version.split()[0], "problems": lines, "skipped_families": family_gaps(families)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", default=",".join(family_modules()))
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    args = ap.parse_args()
    r = report([f for f in args.families.split(",") if f])
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        for line in r["problems"]:  # type: ignore[attr-defined]
            print(f"preflight: {line}", file=sys.stderr)
        for fam, why in r["skipped_families"].items():  # type: ignore[attr-defined]
            print(f"preflight: {fam} will be skipped: {why}", file=sys.stderr)
        if not r["problems"]:
            print(f"preflight: ok (python {r['python']})", file=sys.stderr)
    raise SystemExit(1 if r["problems"] else 0)


if __name__ == "__main__":
    main()
