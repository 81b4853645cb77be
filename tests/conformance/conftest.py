"""Conformance suite: shared settings, and the compatibility results it writes.

Tests marked ``compat(kind, name)`` are the rows of docs/compatibility.md: their outcomes are
written to ``results/<stack>.json`` at the end of the session (merged with earlier runs of the
same stack), and ``python -m hookbridge.testing.compat_table`` renders the table from them.
"""

from __future__ import annotations

import json
import os
import pathlib

import pytest
import tensorflow as tf
from hypothesis import settings

KERAS3 = str(getattr(tf.keras, "__version__", "2")).startswith("3")
STACK = f"tf{'.'.join(tf.__version__.split('.')[:2])}-" + (
    "keras3" if KERAS3 else ("tf_keras" if os.environ.get("TF_USE_LEGACY_KERAS") else "keras2")
)
RESULTS_DIR = pathlib.Path(__file__).parent / "results"

#: examples per property: the CI profile ("ci", 25 by default) is raised to FAST; a profile with
#: more (``--hypothesis-profile=deep``: 10,000) is used as is.
FAST = int(os.environ.get("HOOKBRIDGE_CONFORMANCE_EXAMPLES", "90"))


def examples() -> int:
    return max(settings.default.max_examples, FAST)


_results: dict = {}


def _keras_version() -> str:
    version = getattr(tf.keras, "__version__", None)
    if version is None:
        import importlib

        for module in ("tf_keras", "keras"):
            try:
                version = importlib.import_module(module).__version__
                break
            except (ImportError, AttributeError):
                continue
    return f"{version} ({'tf_keras' if os.environ.get('TF_USE_LEGACY_KERAS') else 'keras'})"


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "compat(kind, name, note=''): a row of docs/compatibility.md"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    marker = item.get_closest_marker("compat")
    if marker is None:
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        kind, name = marker.args[:2]
        note = marker.kwargs.get("note", "")
        if hasattr(report, "wasxfail"):
            status, note = "xfail", (report.wasxfail or note)
        elif report.skipped:
            status = "skipped"
            if isinstance(report.longrepr, tuple):
                note = note or str(report.longrepr[2]).removeprefix("Skipped: ")
        else:
            status = report.outcome  # passed / failed
            if status == "passed" and marker.kwargs.get("refused"):
                status = "refused"
        _results[f"{kind}:{name}"] = {"kind": kind, "name": name, "status": status, "note": note}


def pytest_sessionfinish(session, exitstatus):
    if not _results:
        return
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{STACK}.json"
    data = json.loads(path.read_text()) if path.exists() else {"stack": STACK, "results": {}}
    data["stack"] = STACK
    data["tensorflow"] = tf.__version__
    data["keras"] = _keras_version()
    data["results"].update(_results)
    data["results"] = dict(sorted(data["results"].items()))
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
