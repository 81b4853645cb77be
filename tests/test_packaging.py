"""The wheel and the sdist: distribution name ``tf-hookbridge``, license, metadata, extras, entry
points, package data, and an sdist whose tests run.

Built from a copy of the sources with ``pip wheel --no-deps --no-build-isolation`` and
setuptools' ``build_sdist`` (offline, with the environment's setuptools) and read back from the
archives; nothing is installed.
"""

from __future__ import annotations

import email
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from configparser import ConfigParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The wheel and sdist are built from the sources with setuptools: nothing here imports
#: TensorFlow or Keras but the sdist's own run of test_tfcompat.py, which the suite runs anyway.
pytestmark = pytest.mark.one_stack("the wheel and the sdist are the same files on every stack")
#: What the sdist is built from: the repository's files (git and tox state left out).
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "CHANGELOG.md", "tox.ini",
           "mkdocs.yml", "hookbridge", "tests", "examples", "docs", "benchmarks")
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", "*.egg-info")


@pytest.fixture(scope="module")
def src(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=_IGNORE)
        else:
            shutil.copy(path, src)
    return src


@pytest.fixture(scope="module")
def wheel(src, tmp_path_factory) -> zipfile.ZipFile:
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


@pytest.fixture(scope="module")
def sdist(src, tmp_path_factory) -> Path:
    """The sdist, built by setuptools' PEP 517 backend, unpacked; returns its root folder."""
    out = tmp_path_factory.mktemp("sdist")
    build = (
        "import sys; from setuptools import build_meta; "
        "print(build_meta.build_sdist(sys.argv[1]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", build, str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=src,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    name = proc.stdout.strip().splitlines()[-1]
    assert name == f"tf_hookbridge-{_version()}.tar.gz"
    with tarfile.open(out / name) as archive:
        archive.extractall(out / "unpacked", filter="data")
    return out / "unpacked" / name[: -len(".tar.gz")]


def _version() -> str:
    import hookbridge

    return hookbridge.__version__


def _read(wheel: zipfile.ZipFile, suffix: str) -> str:
    (name,) = [n for n in wheel.namelist() if n.endswith(suffix)]
    return wheel.read(name).decode()


def test_wheel_is_named_tf_hookbridge(wheel):
    assert Path(wheel.filename).name.startswith(f"tf_hookbridge-{_version()}-py3-none-any")
    metadata = email.message_from_string(_read(wheel, ".dist-info/METADATA"))
    assert metadata["Name"] == "tf-hookbridge"
    assert metadata["Version"] == _version()  # the one copy: hookbridge.__version__
    assert metadata["Requires-Python"] == ">=3.10"


def test_license_is_apache_2_in_the_repository_wheel_and_sdist(wheel, sdist):
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in text and "APPENDIX" in text
    assert "Apache-2.0" in (ROOT / "README.md").read_text()  # what the README says it is
    metadata = email.message_from_string(_read(wheel, ".dist-info/METADATA"))
    assert metadata["License-Expression"] == "Apache-2.0"  # SPDX (PEP 639), not the table form
    assert metadata["License"] is None
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert _read(wheel, ".dist-info/licenses/LICENSE") == text
    assert (sdist / "LICENSE").read_text() == text
    sdist_metadata = email.message_from_string((sdist / "PKG-INFO").read_text())
    assert sdist_metadata["License-Expression"] == "Apache-2.0"


def test_classifiers_and_build_requirement(wheel):
    import tomllib

    metadata = email.message_from_string(_read(wheel, ".dist-info/METADATA"))
    classifiers = metadata.get_all("Classifier")
    assert "Typing :: Typed" in classifiers and "Programming Language :: Python :: 3" in classifiers
    # PEP 639: a license expression replaces the License :: classifiers (setuptools refuses both).
    assert not [c for c in classifiers if c.startswith("License ::")]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    # setuptools < 77 cannot build `license = "Apache-2.0"`: the build must ask for 77 or later.
    assert project["build-system"]["requires"] == ["setuptools>=77"]


def test_readme_links_resolve_in_the_sdist(sdist):
    # Relative links of the README (docs/, examples/) lead to files the sdist ships; on the
    # package index the README says to read them in the sdist (it has no public URL yet).
    readme = (sdist / "README.md").read_text()
    links = re.findall(r"\]\(([^)#\s]+)", readme)
    relative = [link for link in links if "://" not in link]
    assert relative, "the README links nothing"
    missing = [link for link in relative if not (sdist / link).exists()]
    assert missing == []


def test_the_sdist_holds_the_test_suite(sdist):
    try:
        tracked = subprocess.run(
            ["git", "ls-files", "tests", "examples", "docs", "benchmarks", "hookbridge"],
            capture_output=True, text=True, check=True, cwd=ROOT, timeout=60,
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not in a git checkout (e.g. run from the sdist itself)")
    missing = [path for path in tracked if not (sdist / path).exists()]
    assert missing == []
    assert not list(sdist.rglob("__pycache__"))


def test_the_sdists_tests_run(sdist):
    # Quick tests of the suite, run from the unpacked sdist against the sdist's own sources (its
    # conftest, and _tfcompat's private symbols, found by reading the sdist's package); the rest
    # of test_tfcompat.py is what the suite itself runs.
    env = {**os.environ, "PYTHONPATH": str(sdist), "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
         "tests/test_tfcompat.py::test_private_symbol_still_exists",
         "tests/test_check.py::test_defaults_adapt_to_what_the_user_gives"],
        capture_output=True, text=True, check=False, cwd=sdist, env=env, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert re.search(r"\d+ passed", proc.stdout)


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
    # TF 2.21 no longer brings tensorboard; Keras's TensorBoard callback needs it.
    assert 'tensorboard;extra=="tensorflow"' in requires
    assert 'tensorboard;extra=="tensorflow-cpu"' in requires
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
