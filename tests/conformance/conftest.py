"""Conformance suite: shared settings, and the check that keeps docs/compatibility.md true.

Tests marked ``compat(kind, name)`` are the rows of docs/compatibility.md. At the end of the
session their outcomes are compared with the committed ``results/<stack>.json`` of this stack
(only the rows this run measured, plus the TensorFlow and Keras versions): any difference fails
the run, with the command that regenerates them. With ``HOOKBRIDGE_UPDATE_RESULTS=1`` the
outcomes are written instead (merged with the rows not run), with the hookbridge version and the
date, and docs/compatibility.md is re-rendered from every stack's file.
"""

from __future__ import annotations

import datetime
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
# The one copy of the results: the package data `hookbridge scan` reads.
RELEASE_RESULTS_DIR = pathlib.Path(__file__).parents[2] / "hookbridge" / "data" / "conformance"
# `tox -e nightly` measures development builds of TF/Keras: their results go beside this file
# (tests/conformance/nightly/), never into the package data `scan` reads.
NIGHTLY_RESULTS_DIR = pathlib.Path(__file__).parent / "nightly"
RESULTS_DIR = pathlib.Path(os.environ.get("HOOKBRIDGE_RESULTS_DIR") or RELEASE_RESULTS_DIR)
PAGE = pathlib.Path(__file__).parents[2] / "docs" / "compatibility.md"
UPDATE = os.environ.get("HOOKBRIDGE_UPDATE_RESULTS") == "1"
REGENERATE = (
    "HOOKBRIDGE_UPDATE_RESULTS=1 python -m pytest tests/conformance/test_builtins.py  "
    "(on this stack; all three: HOOKBRIDGE_UPDATE_RESULTS=1 tox -e keras3,tfkeras,tf215 -- "
    "tests/conformance/test_builtins.py)"
)

#: examples per property. CI (the "ci" Hypothesis profile, whose 25 this count replaces): FAST,
#: 15, derandomized (the same 15 each run, beside the @example regression cases): about 2 s an
#: example on TF 2.15 under load, 4 properties, the two custom-loop ones at half (10). The suite's
#: deep profile (HOOKBRIDGE_PROFILE=deep) runs 90, the count CI ran before the 30 of 2026-11-27
#: and this 15 (350 s a stack). A Hypothesis profile with more (``--hypothesis-profile=deep``:
#: 10,000) is used as is.
DEEP_EXAMPLES = 90
FAST = int(
    os.environ.get(
        "HOOKBRIDGE_CONFORMANCE_EXAMPLES",
        str(DEEP_EXAMPLES) if os.environ.get("HOOKBRIDGE_PROFILE") == "deep" else "15",
    )
)


def examples() -> int:
    profile = settings.default.max_examples
    return profile if profile > DEEP_EXAMPLES else FAST


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


def _session_outcomes(session) -> dict:
    """How many tests of the whole run passed, and which failed (a nightly run's findings)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    stats = reporter.stats if reporter is not None else {}
    failed = sorted(
        {r.nodeid for key in ("failed", "error") for r in stats.get(key, []) if r.nodeid}
    )
    return {
        "passed": len([r for r in stats.get("passed", []) if r.when == "call"]),
        "failed": failed,
        "skipped": len(stats.get("skipped", [])),
    }


def pytest_sessionfinish(session, exitstatus):
    if not _results:
        return
    import hookbridge
    from hookbridge.testing import compat_table

    path = RESULTS_DIR / f"{STACK}.json"
    committed = json.loads(path.read_text()) if path.exists() else {}
    versions = {"tensorflow": tf.__version__, "keras": _keras_version()}
    if UPDATE:
        meta = {
            "stack": STACK,
            **versions,
            "hookbridge": hookbridge.__version__,
            "measured": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        }
        if RESULTS_DIR != RELEASE_RESULTS_DIR:  # nightly: also what the rest of the run found
            meta["tests"] = _session_outcomes(session)
        RESULTS_DIR.mkdir(exist_ok=True)
        data = compat_table.updated(committed, _results, meta)
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        compat_table.write_page(RELEASE_RESULTS_DIR, PAGE, NIGHTLY_RESULTS_DIR)
        return
    lines = compat_table.differences(committed, _results, versions)
    if not lines:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    text = (
        f"The conformance outcomes measured on {STACK} differ from the committed "
        f"{path.relative_to(PAGE.parents[1])} (docs/compatibility.md is rendered from it):\n  "
        + "\n  ".join(lines)
        + f"\nIf the new outcomes are right, regenerate the results and the page:\n  {REGENERATE}"
    )
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_sep("=", "stale compatibility results", red=True)
        reporter.write_line(text)
    else:
        print(text)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
