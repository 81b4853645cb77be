"""The wheel: distribution name ``tf-hookbridge``, its extras, entry points and package data.

Built from a copy of the sources with ``pip wheel --no-deps --no-build-isolation`` (offline, with
the environment's setuptools) and read back from the archive; nothing is installed.
"""

from __future__ import annotations

import email
import re
import shutil
import subprocess
import sys
import zipfile
from configparser import ConfigParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    src = tmp_path_factory.mktemp("src")
    shutil.copy(ROOT / "pyproject.toml", src)
    shutil.copy(ROOT / "README.md", src)
    shutil.copytree(
        ROOT / "hookbridge", src / "hookbridge", ignore=shutil.ignore_patterns("__pycache__")
    )
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    (path,) = out.glob("*.whl")
    with zipfile.ZipFile(path) as archive:
        yield archive


def _read(wheel: zipfile.ZipFile, suffix: str) -> str:
    (name,) = [n for n in wheel.namelist() if n.endswith(suffix)]
    return wheel.read(name).decode()


def test_wheel_is_named_tf_hookbridge(wheel):
    assert Path(wheel.filename).name.startswith("tf_hookbridge-0.1.0-py3-none-any")
    metadata = email.message_from_string(_read(wheel, ".dist-info/METADATA"))
    assert metadata["Name"] == "tf-hookbridge"
    assert metadata["Requires-Python"] == ">=3.10"


def test_extras_pick_tensorflow_or_tensorflow_cpu(wheel):
    metadata = email.message_from_string(_read(wheel, ".dist-info/METADATA"))
    assert set(metadata.get_all("Provides-Extra")) == {
        "tensorflow",
        "tensorflow-cpu",
        "demo",
        "test",
    }
    requires = {r.replace(" ", "") for r in metadata.get_all("Requires-Dist")}
    assert "numpy" in requires  # the only hard dependency: no TensorFlow without an extra
    assert 'tensorflow>=2.15;extra=="tensorflow"' in requires
    assert 'tensorflow-cpu>=2.15;extra=="tensorflow-cpu"' in requires
    assert not [r for r in requires if r.startswith("tensorflow") and "extra" not in r]


def test_entry_points(wheel):
    parser = ConfigParser()
    parser.read_string(_read(wheel, ".dist-info/entry_points.txt"))
    assert dict(parser["console_scripts"]) == {"hookbridge": "hookbridge.cli:main"}
    assert dict(parser["pytest11"]) == {"hookbridge": "hookbridge.testing.pytest_plugin"}


def test_package_data_and_modules(wheel):
    names = set(wheel.namelist())
    results = sorted(p.name for p in (ROOT / "hookbridge" / "data" / "conformance").glob("*.json"))
    assert results and {f"hookbridge/data/conformance/{n}" for n in results} <= names
    for path in (
        "hookbridge/py.typed",
        "hookbridge/data/mtcars.csv",
        "hookbridge/cli.py",
        "hookbridge/_migrate/scan/analyze.py",
        "hookbridge/_conform/conform.py",
        "hookbridge/testing/pytest_plugin.py",
    ):
        assert path in names, path
    assert not [n for n in names if n.startswith(("tests/", "examples/"))]


def _installed_names(line: str) -> list[str]:
    """The requirement names after each ``pip install`` on a line (up to ``&&``, ``;``, ...)."""
    names = []
    for segment in line.split("pip install")[1:]:
        segment = re.split(r"&&|;|\||`|#", segment)[0]
        for token in segment.split():
            token = token.strip("\"'")
            if token and not token.startswith("-"):
                names.append(re.split(r"[\[<>=!~]", token)[0])
    return names


def test_every_install_line_names_tf_hookbridge():
    # `hookbridge` on PyPI is another project: no install line may name it.
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "examples").rglob("*.py")]
    files += list((ROOT / "hookbridge").rglob("*.py"))
    installed = {
        (str(path.relative_to(ROOT)), name)
        for path in files
        for line in path.read_text().splitlines()
        for name in _installed_names(line)
    }
    assert [item for item in installed if item[1] == "hookbridge"] == []
    assert ("README.md", "tf-hookbridge") in installed
    assert ("docs/index.md", "tf-hookbridge") in installed
    assert ("hookbridge/_demo.py", "tf-hookbridge") in installed  # the demo's missing-extra error
    assert _installed_names('pip install -U "hookbridge[demo]" && x') == ["hookbridge"]
