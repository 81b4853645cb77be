"""The scan's prefilter (hookbridge/_migrate/scan/prefilter.py) changes no finding.

Files whose text holds no name the analysis reacts to are only syntax-checked, not parsed and
walked. Every test here scans the same tree twice, as shipped and with every file read (the
prefilter answering "read it" for all), and compares every field of every finding; the projects
are written so that a file the prefilter wrongly skipped would lose a row.
"""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest

from hookbridge._migrate.scan import findings, prefilter, scan

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.one_stack("the scan reads source text and never imports TensorFlow")


def _scan_reading_everything(path: Path, monkeypatch: pytest.MonkeyPatch):
    with monkeypatch.context() as m:
        m.setattr(prefilter, "words_if_unneeded", lambda source, rel: None)
        return scan(path)


def _rows(result):
    return [x.as_dict() for x in result.findings]


def _write(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(textwrap.dedent(text).lstrip())
    return root


def _generator():
    spec = importlib.util.spec_from_file_location(
        "scan_speed", ROOT / "benchmarks" / "scan_speed.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate


@pytest.mark.parametrize(
    "tree",
    [
        "tests/fixtures/tf1_project",
        "tests/fixtures/tpu_project",
        "tests/fixtures/census_project",
        "tests/fixtures/wide_deep_project",
        "tests/fixtures/census_twin",
    ],
)
def test_the_fixtures_scan_the_same_with_every_file_read(tree, monkeypatch):
    assert _rows(scan(ROOT / tree)) == _rows(_scan_reading_everything(ROOT / tree, monkeypatch))


def test_the_benchmark_corpus_scans_the_same_and_most_files_are_only_checked(
    tmp_path, monkeypatch
):
    root = _generator()(tmp_path, 40)
    sources = [p.read_bytes() for p in sorted((root / "project").glob("part_*.py"))]
    skipped = [s for s in sources if prefilter.words_if_unneeded(s, "part.py") is not None]
    assert 0.5 < len(skipped) / len(sources) < 0.9  # the numeric-only modules
    got = scan(root)
    assert got.files == 41 and len(got.findings) > 100
    assert _rows(got) == _rows(_scan_reading_everything(root, monkeypatch))


# A project where each reason to read a file is the only one that file has.
PROJECT = {
    "pkg/__init__.py": "",
    # "class": a subclass of a hook defined elsewhere, named nowhere else in its file.
    "pkg/base.py": """
        import tensorflow.compat.v1 as tf

        class BaseWatch(tf.train.SessionRunHook):
            pass
        """,
    "pkg/sub.py": """
        from pkg import base as b

        class Sub(b.BaseWatch):
            def __init__(self, limit):
                self.limit = limit

        def make_sub():
            return Sub(0.5)
        """,
    # A scanned hook class's name only (stage 2): a custom hook built with keywords.
    "pkg/uses_class.py": """
        from pkg.sub import Sub

        def build(limit):
            return Sub(limit=limit)
        """,
    # A factory's name only (stage 3).
    "pkg/uses_factory.py": """
        from pkg import sub

        def parts():
            return [sub.make_sub(), 3]
        """,
    # A class that is no hook, called with keywords: no row, wherever it is called.
    "pkg/plain.py": """
        class Plain:
            def __init__(self, size):
                self.size = size
        """,
    "pkg/uses_plain.py": """
        from pkg.plain import Plain

        def build():
            return Plain(size=2)
        """,
    # A name a hook and another class share: ambiguous by name, read or not.
    "pkg/twin.py": """
        class BaseWatch:
            pass
        """,
    "pkg/uses_twin.py": """
        def build(make):
            return BaseWatch(every=2), make(hooks=[])
        """,
    # Turning eager execution off (graph-mode tf.keras for every TF1 module) ...
    "pkg/setup.py": """
        import tensorflow.compat.v1 as tf

        tf.disable_eager_execution()
        """,
    # ... and a fit(callbacks=...) whose callback is nothing the catalog knows.
    "pkg/fit.py": """
        import tensorflow.compat.v1 as tf

        def run(model, data, make):
            model.fit(data, callbacks=[make()])
        """,
    # Two train ops in one function: a custom loop.
    "pkg/gan.py": """
        def steps(opt_g, opt_d, loss_g, loss_d):
            return opt_g.minimize(loss_g), opt_d.minimize(loss_d)
        """,
    # Tensor names in a constant of a file that holds nothing else (parsed on demand).
    "pkg/names.py": """
        TO_LOG = dict((n, n) for n in ["loss", "accuracy"])
        """,
    "pkg/model.py": """
        import tensorflow.compat.v1 as tf
        from pkg import names

        def hooks():
            return [tf.train.LoggingTensorHook(tensors=names.TO_LOG, every_n_iter=10)]
        """,
    # Spellings that stop importing, in an import only.
    "pkg/legacy.py": """
        from tensorflow_estimator.python.estimator import run_config

        CONFIG = run_config
        """,
    # Not pure ASCII: NFKC folds the full-width name into LoggingTensorHook.
    "pkg/wide.py": (
        "import tensorflow.compat.v1 as tf\n\n"
        "HOOK = tf.\uff54\uff52\uff41\uff49\uff4e.\uff2c\uff4f\uff47\uff47\uff49\uff4e\uff47"
        "\uff34\uff45\uff4e\uff53\uff4f\uff52\uff28\uff4f\uff4f\uff4b('loss:0')\n"
    ).encode("utf-8"),
    # An encoding that spells LoggingTensorHook in ASCII bytes.
    "pkg/seven.py": (
        b"# coding: utf-7\nimport tensorflow.compat.v1 as tf\n\n"
        b"HOOK = tf.+AHQ-rain.Logging+AFQ-ensor+AEg-ook('loss:0')\n"
    ),
    # The same after a blank first line, with old Mac line ends (the tokenizer reads \r as one).
    "pkg/seven_cr.py": (
        b"\r# coding: utf-7\rimport tensorflow.compat.v1 as tf\r"
        b"HOOK = tf.+AHQ-rain.Logging+AFQ-ensor+AEg-ook('loss:0')\r"
    ),
    # Relative imports in a package whose path is a removed spelling.
    "tensorflow/contrib/tpu/glue.py": """
        from . import util
        from .. import layers
        """,
    # A function giving its parameter to a hook's tensors (read: "Hook"), a wrapper of it that
    # names no hook (read once the first is known), and a caller of the wrapper (read once the
    # wrapper is known): the caller's names are rows where it writes them (stage 4, repeated).
    "pkg/helpers.py": """
        import tensorflow.compat.v1 as tf

        def logging_hook(names):
            return tf.train.LoggingTensorHook(names, every_n_iter=1)
        """,
    "pkg/wrap.py": """
        from pkg import helpers

        def wrapped(names):
            return helpers.logging_hook(names)
        """,
    "pkg/uses_wrap.py": """
        from pkg import wrap

        def job():
            return wrap.wrapped(["accuracy", "loss"])
        """,
    # Python 2: a parse error, in a file with nothing else.
    "pkg/py2.py": 'print "hello"\n',
    # Accepted by ast.parse, refused by symtable: parsed, no parse error.
    "pkg/odd.py": "nonlocal x\n",
    # Nothing at all: only checked.
    "pkg/numeric.py": """
        import numpy as np

        def norm(values, scale=2):
            return np.sqrt(sum(v * v for v in values)) * scale
        """,
}


def test_a_project_of_edge_cases_scans_the_same(tmp_path, monkeypatch):
    root = _write(tmp_path, PROJECT)
    got = scan(root)
    assert _rows(got) == _rows(_scan_reading_everything(root, monkeypatch))
    rows = {(x.path, x.kind, x.name, x.status) for x in got.findings}
    expected = {
        ("pkg/sub.py", "hook-class", "Sub", findings.CUSTOM),
        ("pkg/uses_class.py", "hook", "Sub", findings.CUSTOM),
        ("pkg/uses_factory.py", "hook", "Sub", findings.CUSTOM),
        ("pkg/fit.py", "entry-point", "model.fit", findings.ENTRY_POINT),
        ("pkg/gan.py", "entry-point", "several train ops", findings.ENTRY_POINT),
        ("pkg/model.py", "tensor", "'loss'", findings.CONFORMS),
        ("pkg/model.py", "tensor", "'accuracy'", findings.NEEDS_TENSOR),
        ("pkg/wide.py", "hook", "LoggingTensorHook", findings.CONFORMS),
        ("pkg/seven.py", "hook", "LoggingTensorHook", findings.CONFORMS),
        ("pkg/seven_cr.py", "hook", "LoggingTensorHook", findings.CONFORMS),
        ("pkg/py2.py", "file", "pkg/py2.py", findings.PARSE_ERROR),
        ("pkg/helpers.py", "hook", "LoggingTensorHook", findings.NEEDS_TENSOR),
        ("pkg/uses_wrap.py", "tensor", "'accuracy'", findings.NEEDS_TENSOR),
        ("pkg/uses_wrap.py", "tensor", "'loss'", findings.CONFORMS),
    }
    assert expected <= rows, sorted(expected - rows)
    assert any(x.path == "pkg/legacy.py" and x.status == findings.REMOVED_API for x in got.findings)
    assert not [x for x in got.findings if x.path in ("pkg/odd.py", "pkg/numeric.py")]
    glue = [x.name for x in got.findings if x.path == "tensorflow/contrib/tpu/glue.py"]
    assert glue == ["tf.contrib.tpu.util", "tf.contrib.layers"]


def test_only_files_without_any_such_name_are_skipped():
    def skipped(text: str | bytes) -> bool:
        source = text if isinstance(text, bytes) else textwrap.dedent(text).encode()
        return prefilter.words_if_unneeded(source, "pkg/x.py") is not None

    assert skipped(PROJECT["pkg/numeric.py"]) and skipped(PROJECT["pkg/names.py"])
    read = ("base", "sub", "setup", "fit", "gan", "legacy", "wide", "seven", "seven_cr", "model")
    for name in read:
        assert not skipped(PROJECT[f"pkg/{name}.py"]), name
    # Skipped by its text alone, read once the scan knows the names of its hook class/factory.
    assert skipped(PROJECT["pkg/uses_class.py"]) and skipped(PROJECT["pkg/uses_factory.py"])
    assert skipped(PROJECT["pkg/wrap.py"]) and skipped(PROJECT["pkg/uses_wrap.py"])
    assert prefilter.parses(b"x = 1\n", "x.py")
    assert not prefilter.parses(b'print "hello"\n', "x.py")
    assert not prefilter.parses(b"nonlocal x\n", "x.py")  # ast.parse accepts it: parse to know
