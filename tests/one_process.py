"""Scripts run one after the other in ONE Python subprocess, each as its command line runs it.

A subprocess that imports TensorFlow pays its start-up (6-8 s of CPU); tests that only need a
script's output (an example, a benchmark in its short mode) share one process: :func:`run_scripts`
runs each script with ``runpy`` as ``__main__``, with ``sys.argv`` = [script, *args], the script's
folder first on ``sys.path`` (as ``python script.py`` puts it), ``tempfile``'s folder (what
``TMPDIR`` sets) the job's, and file descriptors 1 and 2 sent to the job's own files (what
Python, absl's logging and TensorFlow's C++ print all land in, as in a process of its own). A
script that raises or exits non-zero fails its own job only; the next one still runs. What a
script leaves in the process (imported modules, TensorFlow's state, a log level) the next one
sees: the first runs in a fresh interpreter, the others as a second run in the same one would.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_DRIVER = r"""
import gc, json, os, runpy, sys, tempfile, traceback

statuses = {}
for name, path, args, tmpdir, out, err in json.loads(sys.argv[1]):
    sys.argv, tempfile.tempdir = [path, *args], tmpdir
    sys.path.insert(0, os.path.dirname(path))
    sys.stdout.flush(), sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(out, "w") as o, open(err, "w") as e:
        os.dup2(o.fileno(), 1), os.dup2(e.fileno(), 2)
        try:
            runpy.run_path(path, run_name="__main__")
            status = 0
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
            status = 1
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)
            os.close(saved[0]), os.close(saved[1])
    sys.path.remove(os.path.dirname(path))
    statuses[name] = status
    gc.collect()
print(json.dumps(statuses))
"""


@dataclass
class Job:
    """One script to run: ``name`` (the key of its result), its path and arguments, and the
    folder ``tempfile`` hands out while it runs (None: the process's own)."""

    name: str
    path: Path
    args: tuple[str, ...] = ()
    tmpdir: Path | None = None


@dataclass
class Ran:
    """What a job did: its exit status, stdout and stderr."""

    name: str
    returncode: int
    stdout: str
    stderr: str

    def check(self) -> Ran:
        """Itself, once its exit status is 0 (else fails with the end of its output)."""
        assert self.returncode == 0, (
            f"{self.name} failed:\n{self.stdout[-2000:]}\n{self.stderr[-4000:]}"
        )
        return self


def run_scripts(jobs: list[Job], workdir: Path, env: dict, timeout: float) -> dict[str, Ran]:
    """Runs ``jobs`` in turn in one subprocess (within ``timeout`` seconds in all, killed and
    failed after); their outputs are kept in ``workdir``. Returns each job's :class:`Ran`."""
    spec = [
        [
            job.name,
            str(job.path),
            list(job.args),
            None if job.tmpdir is None else str(job.tmpdir),
            str(workdir / f"{i}.out"),
            str(workdir / f"{i}.err"),
        ]
        for i, job in enumerate(jobs)
    ]
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER, json.dumps(spec)],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert proc.returncode == 0, f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    statuses = json.loads(proc.stdout.strip().splitlines()[-1])
    return {
        name: Ran(name, statuses[name], Path(out).read_text(), Path(err).read_text())
        for name, _, _, _, out, err in spec
    }
