"""``scripts/gpu_check.sh``: the dry run with no GPU, the GPU path at toy size on the
CPU, the preflight that names what a bare node lacks, the wheel bundle, and the check in a clean
environment like the GPU image's (torch from this machine, transformers 5.17, the bundle)."""

from __future__ import annotations

import ast
import importlib.metadata as md
import json
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import gpu_check_preflight as preflight  # noqa: E402

from naru_eval.adapters.registry import registered  # noqa: E402

#: the GPU image's transformers (the venv test installs exactly this one)
IMAGE_TRANSFORMERS = "5.17.0"
BASE_ENV = {"PATH": "/usr/bin:/bin"}


def run_check(*args: str, python: str = sys.executable, env: dict[str, str] | None = None, timeout: int = 600):
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**BASE_ENV, "PYTHON": python, **(env or {})},
    )


def test_gpu_check_dry_run(tmp_path):
    out = tmp_path / "gpu_check.json"
    run = run_check("--dry-run", "--out", str(out), "--workdir", str(tmp_path), env={"HOME": str(tmp_path)})
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    result = json.loads(out.read_text())
    assert result["dry_run"] is True
    fams = {f["family"]: f for f in result["families"]}
    assert set(fams) == {f.model_id for f in preflight.family_modules().values()}  # every config in scripts/gpu_configs
    for f in fams.values():
        assert f["ok"] and all(f["checks"].values()), f
    # the real sizes: Qwen2.5-VL-7B 8.29 B, Qwen3-VL-8B 8.77 B, InternVL3.5-8B 8.53 B, Qwen3.5-9B
    # 9.41 B, GLM-4.1V-9B 10.29 B parameters; Nemotron at a quarter of its depth (13 of 52 layers) 8.16 B
    assert round(fams["naru_qwen2_5_vl"]["params_b"], 1) == 8.3
    assert round(fams["naru_qwen3_vl"]["params_b"], 1) == 8.8
    assert round(fams["naru_internvl3_5"]["params_b"], 1) == 8.5
    assert round(fams["naru_qwen3_5"]["params_b"], 1) == 9.4
    assert round(fams["naru_nemotron_omni"]["params_b"], 1) == 8.2
    assert round(fams["naru_glm4v"]["params_b"], 1) == 10.3


def check_tiny_result(fam: dict, questions: int) -> None:
    """What a --tiny family must show: both paths ran, the prefix was shared, the first-step
    float32 logits agree, SDPA ran and the position layout is named."""
    assert fam.get("ok") is True, fam
    assert fam["attention"] == "sdpa" and fam["dtype"] == "float32"
    assert fam["max_abs_logit_diff"] <= 1e-4 and fam["logit_scale"] > 0
    assert fam["shared"]["prefix_prefills"] == 1 and fam["per_question"]["prefix_prefills"] == questions
    assert fam["shared"]["prefill_tokens"] < fam["per_question"]["prefill_tokens"]
    assert fam["shared"]["s_per_question"] > 0


def test_gpu_path_runs_at_toy_size_on_cpu(tmp_path):
    """``--tiny``: the script's GPU path (build, shared vs per question, the JSON) on the CPU;
    Qwen3-VL samples at 0.25 fps through qwen-vl-utils (4 frames of the 20-s video)."""
    out = tmp_path / "tiny.json"
    run = run_check(
        "--tiny",
        "--questions",
        "2",
        "--families",
        "qwen2_5_vl,qwen3_vl,glm4v",
        "--out",
        str(out),
        "--workdir",
        str(tmp_path),
    )
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    result = json.loads(out.read_text())
    fams = {f["family"]: f for f in result["families"]}
    for fam in fams.values():
        check_tiny_result(fam, 2)
    assert fams["naru_qwen2_5_vl"]["shared"]["frames"] == 8 and fams["naru_qwen2_5_vl"]["positions"] == "qwen-reference"
    assert fams["naru_qwen3_vl"]["sampling"] == {"fps": 0.25} and fams["naru_qwen3_vl"]["shared"]["frames"] == 4
    assert fams["naru_glm4v"]["positions"] == "model-own"  # GLM-4.1V computes its own M-RoPE positions
    # answering needs neither lmms-eval nor an API SDK
    third = set(result["imported"]["third_party"])
    assert not third & {"lmms_eval", "openai", "google", "datasets"}, third
    assert {"av", "pydantic", "loguru", "qwen_vl_utils", "transformers", "torch"} <= third
    # every package the check's own modules imported is in the GPU image or in the wheel bundle,
    # and every wheel of the bundle is needed (directly, or by another wheel of it)
    direct = third_party_imports(result["imported"]["repo_files"]) & third
    dists = {d for m in direct for d in dists_of(m)}
    bundle = {canon(n.dist) for n in preflight.bundle()}
    image = {canon(d) for d in preflight.GPU_IMAGE_DISTS}
    assert dists <= image | bundle, dists - image - bundle
    assert closure(dists - image, image) == bundle


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def dists_of(module: str) -> list[str]:
    names = md.packages_distributions().get(module)
    assert names, f"{module}: no installed distribution provides it"
    return [canon(n) for n in names]


def third_party_imports(repo_files: list[str]) -> set[str]:
    """Top-level third-party modules these files of ours import (every import statement, also
    inside functions), plus the GPU check's family modules the run did not load."""
    checked = {fam.model_id for fam in preflight.family_modules().values()}
    families = {str(r.path.relative_to(ROOT)) for r in registered().values() if r.id in checked}
    files = set(repo_files) | families
    ours = {"naru_eval", "model_adapters", "tests", "scripts", "gpu_check_preflight"}
    out = set()
    for rel in files:
        for node in ast.walk(ast.parse((ROOT / rel).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            out |= {n.split(".")[0] for n in names}
    return {m for m in out if m not in ours and m not in sys.stdlib_module_names and m != "__future__"}


def closure(dists: set[str], image: set[str]) -> set[str]:
    """``dists`` and what they require (no extras, markers for Python 3.12), minus the image's,
    except an image package they need at a minimum version (the image's may be older: pydantic
    needs typing-extensions >= 4.16)."""
    from packaging.requirements import Requirement

    env = {"python_version": "3.12", "python_full_version": "3.12.0", "sys_platform": "linux"}
    todo, seen = [(d, False) for d in dists], set()
    while todo:
        d, floor = todo.pop()
        if d in seen or (d in image and not floor):
            continue
        seen.add(d)
        for r in md.requires(d) or []:
            req = Requirement(r)
            if req.marker is None or req.marker.evaluate({**env, "extra": ""}):
                todo.append((canon(req.name), any(s.operator in (">=", "==", ">") for s in req.specifier)))
    return seen


# ------------------------------------------------------------------------------ the preflight


def preflight_json(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict]:
    run = subprocess.run(
        [sys.executable, *args, str(ROOT / "scripts" / "gpu_check_preflight.py"), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**BASE_ENV, **(env or {})},
    )
    return run.returncode, json.loads(run.stdout)


def test_preflight_names_every_missing_package_with_its_fix():
    """A bare interpreter (no site-packages): every package the check needs is named, the image's
    with a pip line, the bundle's with the wheel script and the node's install command."""
    rc, r = preflight_json("-I", "-S")
    assert rc == 1
    lines = r["problems"]
    for need in preflight.IMAGE + preflight.bundle():
        (line,) = [x for x in lines if x.startswith(f"missing: {need.dist} ")]
        if need.source == "bundle":
            assert "bash scripts/gpu_wheels.sh" in line and preflight.INSTALL in line
        else:
            assert f"pip install '{need.dist}>={need.minimum}'" in line
    assert len(lines) == len(preflight.IMAGE) + len(preflight.bundle())
    assert set(r["skipped_families"]) == set(preflight.family_modules())


def test_preflight_names_a_too_old_transformers_and_the_families_it_lacks(tmp_path):
    """transformers 5.10 (a stand-in distribution: metadata and an empty package) is too old, and
    no family's model module is found in it."""
    (tmp_path / "transformers").mkdir()
    (tmp_path / "transformers" / "__init__.py").write_text("")
    meta = tmp_path / "transformers-5.10.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: transformers\nVersion: 5.10.0\n")
    rc, r = preflight_json("-S", env={"PYTHONPATH": str(tmp_path)})
    assert rc == 1
    assert "too old: transformers 5.10.0 < 5.17 -> pip install 'transformers>=5.17'" in " ".join(r["problems"])
    assert not any(x.startswith("missing: transformers ") for x in r["problems"])
    assert "NemotronH_Omni_Reasoning_V3" in r["skipped_families"]["nemotron_omni"]


def test_preflight_passes_here():
    run = run_check("--preflight")
    assert run.returncode == 0, run.stderr
    assert "preflight: missing" not in run.stderr and "too old" not in run.stderr


# ------------------------------------------------------------------------------ the bundle


def needs_package_index(tmp_path: Path) -> None:
    """Skip, saying so, where pip reaches no package index (these tests download wheels)."""
    probe = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            "-d",
            str(tmp_path / "probe"),
        ]
        + ["annotated-types==0.8.0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if probe.returncode != 0:
        pytest.skip(f"no package index reachable: {probe.stderr.strip()[-300:]}")


@pytest.mark.slow
def test_wheel_bundle_is_the_cp312_wheels_of_the_pins(tmp_path):
    """``scripts/gpu_wheels.sh`` (from PyPI): exactly the pinned wheels, each for CPython 3.12 (or
    pure Python) on manylinux x86-64, their sizes and total within 64 MiB, and the one command
    for the node; the pure-Python and binary wheels install into a Python 3.12 target and the
    modules that need nothing from the image import there."""
    needs_package_index(tmp_path)
    out = tmp_path / "whl"
    run = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_wheels.sh")],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "WHEEL_DIR": str(out)},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    wheels = sorted(p.name for p in out.glob("*.whl"))
    pins = preflight.bundle()
    assert len(wheels) == len(pins)
    for need in pins:
        (w,) = [x for x in wheels if x.startswith(f"{canon(need.dist).replace('-', '_')}-{need.minimum}-")]
        assert re.search(r"-(cp312-cp312|py3-none)-(manylinux[\w.]*x86_64|any)\.whl$", w), w
        assert re.search(rf"^\s*[\d.]+ MiB  {re.escape(w)}$", run.stdout, re.M), w
    total = float(re.search(r"([\d.]+) MiB  total", run.stdout).group(1))
    assert 0 < total <= 64 and sum(p.stat().st_size for p in out.glob("*.whl")) <= 64 << 20
    assert preflight.INSTALL in run.stdout
    py312 = python312()
    if py312 is None:
        pytest.skip("no Python 3.12 here to install the cp312 wheels into")
    target = tmp_path / "site"
    inst = subprocess.run(
        [
            py312,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--target",
            str(target),
            *map(str, out.glob("*.whl")),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert inst.returncode == 0, inst.stderr
    standalone = ["av", "pydantic", "pydantic_core", "annotated_types", "typing_inspection", "loguru"]
    code = f"import {', '.join(standalone)}; import av.video; pydantic.BaseModel"
    imp = subprocess.run([py312, "-S", "-c", code], capture_output=True, text=True, env={"PYTHONPATH": str(target)})
    assert imp.returncode == 0, imp.stderr


def python312() -> str | None:
    """A working Python 3.12 interpreter (a pyenv shim may name one it cannot run)."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    for cand in ["python3.12", *map(str, sorted(root.glob("versions/3.12*/bin/python3.12")))]:
        try:
            ok = subprocess.run([cand, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
        except OSError:
            continue
        if ok.returncode == 0 and ok.stdout.strip() == "(3, 12)":
            return cand
    return None


# ------------------------------------------------------------------------------ a clean environment


def image_packages_dir(dest: Path) -> Path:
    """A folder of links to this machine's torch and torchvision and what they require (markers
    for this Python, no extras), and nothing else: the part of the GPU image the check uses that
    is not downloaded (the venv sees it through a .pth file)."""
    from packaging.requirements import Requirement

    dest.mkdir()
    todo, seen = ["torch", "torchvision"], set()
    while todo:
        name = canon(todo.pop())
        if name in seen:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        seen.add(name)
        for r in dist.requires or []:
            req = Requirement(r)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
        site = Path(str(dist.locate_file("")))
        for top in {Path(str(f)).parts[0] for f in dist.files or []}:
            src = site / top
            if src.exists() and not (dest / top).exists() and top != "..":
                (dest / top).symlink_to(src)
    return dest


@pytest.mark.slow
def test_check_runs_in_a_clean_environment_like_the_gpu_image(tmp_path):
    """A new virtual environment (this machine's Python 3.11) that sees this machine's torch and
    torchvision with their requirements, transformers 5.17 (the GPU image's, from PyPI, with its
    requirements) and the bundle's pins (the cp311 builds of the same versions), and nothing else:
    ``gpu_check.sh --tiny`` runs every family transformers 5.17 has and names the one it lacks."""
    needs_package_index(tmp_path)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    py = str(env_dir / "bin" / "python")
    site = Path(
        subprocess.run(
            [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True
        ).stdout.strip()
    )
    (site / "gpu_image.pth").write_text(str(image_packages_dir(tmp_path / "image")) + "\n")
    pins = [f"{n.dist}=={n.minimum}" for n in preflight.bundle()]
    for cmd in (
        [py, "-m", "pip", "install", "-q", f"transformers=={IMAGE_TRANSFORMERS}", "requests"],
        [py, "-m", "pip", "install", "-q", "--no-deps", *pins],
    ):
        inst = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        assert inst.returncode == 0, inst.stderr[-3000:]
    listed = subprocess.run([py, "-m", "pip", "list", "--format=json"], capture_output=True, text=True).stdout
    have = {canon(p["name"]) for p in json.loads(listed)}
    assert "lmms-eval" not in have and "openai" not in have and "naru-eval" not in have
    out = tmp_path / "tiny.json"
    run = run_check(
        "--tiny", "--questions", "2", "--out", str(out), "--workdir", str(tmp_path), python=py, timeout=1800
    )
    assert run.returncode == 0, (run.stdout + run.stderr)[-6000:]
    fams = {f["family"]: f for f in json.loads(out.read_text())["families"]}
    assert "transformers 5.17.0 has no NemotronH_Omni_Reasoning_V3" in fams.pop("naru_nemotron_omni")["skipped"]
    assert set(fams) == {f.model_id for f in preflight.family_modules().values()} - {"naru_nemotron_omni"}
    for fam in fams.values():
        check_tiny_result(fam, 2)
