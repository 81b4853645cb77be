"""Loading a fixture directory's generator script as a module of its own name; a rerun of a
fixture checked against its record, within what another CPU rounds differently.

Several fixture directories hold a ``make_fixture.py``; imported as ``make_fixture`` through
``sys.path`` they are one module to Python, and whichever test file imports first wins for the
whole run (tests/test_twin_matrix.py read tests/fixtures/twin_build's cases in a full run).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import tensorflow as tf


def fixture_script(directory: Path, script: str = "make_fixture") -> ModuleType:
    """``directory/script.py`` as the module ``<directory name>_<script>``, loaded once."""
    name = f"{directory.name}_{script}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, directory / f"{script}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def assert_rerun_as_recorded(
    made: dict, recorded: dict, written: Path, fixture: Path, runs
) -> None:
    """A keras3 fixture rerun: the same files and variables, each loss run as recorded and every
    tensor as recorded, within what another CPU gives (not bit for bit).

    TF 2.21's kernels round differently from one CPU to another (TF 2.15's reproduce its records
    bit for bit): on an AMD EPYC machine the census rerun's 300 -> 360 losses were 5.8e-6 from
    the record, its in-memory 360 -> 420 losses 9e-5 (60 steps amplify a rounding), its step-360
    checkpoint 7.2e-7 of each tensor's largest value; BERT's losses 1.7e-7. A stale fixture (code that writes something
    else) moves these by orders of magnitude more: the first 8 losses are held to rtol 2e-5 (the
    issue's), every loss to 1e-3, every tensor to 1e-5 of the largest value of its kind (1e-9
    at least)."""
    for run in runs:
        got, want = np.asarray(made[run], np.float64), np.asarray(recorded[run], np.float64)
        assert got.shape == want.shape, run
        np.testing.assert_allclose(got[:8], want[:8], rtol=2e-5, err_msg=run)
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=0, err_msg=run)
    assert sorted(p.name for p in written.iterdir()) == sorted(p.name for p in fixture.iterdir())
    assert_checkpoint_as_recorded(str(written), str(fixture))


def assert_checkpoint_as_recorded(written: str, fixture: str, scale: float = 1e-5) -> None:
    """The checkpoint at ``written`` (a directory or a checkpoint prefix) has the recorded one's
    names and shapes, each non-float tensor equal and each float tensor within ``scale`` of the
    largest value of its kind (1e-9 at least): another CPU's roundings, not a stale fixture."""
    mine, theirs = (tf.train.load_checkpoint(p) for p in (written, fixture))
    shapes = theirs.get_variable_to_shape_map()
    assert mine.get_variable_to_shape_map() == shapes
    # A tensor's scale is that of its kind (the last part of its name: every ``bias``, every
    # ``adam_v``): a tensor can be rounding noise itself (BERT's attention key bias has a zero
    # gradient; Adam's normalised steps make it 1e-6 of noise, 5 % apart across CPUs).
    floats = {n: theirs.get_tensor(n) for n in shapes}
    floats = {n: t for n, t in floats.items() if t.dtype.kind in "fc"}
    kind_scale: dict[str, float] = {}
    for name, tensor in floats.items():
        kind = name.rsplit("/", 1)[-1]
        kind_scale[kind] = max(kind_scale.get(kind, 0.0), float(np.abs(tensor).max(initial=0.0)))
    far = {}
    for name in shapes:
        a, b = mine.get_tensor(name), theirs.get_tensor(name)
        if name not in floats:
            if not np.array_equal(a, b):
                far[name] = "differs"
            continue
        allowed = max(kind_scale[name.rsplit("/", 1)[-1]] * scale, 1e-9)
        gap = float(np.abs(a.astype(np.float64) - b).max(initial=0.0))
        if gap > allowed:
            far[name] = (gap, allowed)
    assert far == {}, far


def assert_json_as_recorded(got, want, rtol: float = 1e-6, atol: float = 1e-7, where="") -> None:
    """A native rerun's JSON-shaped values as its record: the same structure, strings, ints and
    booleans; floats within ``rtol``/``atol`` (another CPU rounds differently: on an AMD EPYC
    machine TF 2.15's reruns were a float32 rounding or two off records made elsewhere)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), (where, got, want)
        for key in want:
            assert_json_as_recorded(got[key], want[key], rtol, atol, f"{where}/{key}")
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), (where, got, want)
        for i, (a, b) in enumerate(zip(got, want)):
            assert_json_as_recorded(a, b, rtol, atol, f"{where}[{i}]")
    elif isinstance(want, float) and not isinstance(got, bool):
        assert isinstance(got, (int, float)), (where, got, want)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=where)
    else:
        assert got == want, (where, got, want)
