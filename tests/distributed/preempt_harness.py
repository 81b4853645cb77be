"""A harness for the preemption scenarios: processes of ``ps_preempt.py`` started, killed with
SIGKILL and restarted by name, each in a session of its own, with one deadline for the whole
scenario, and nothing left behind (checked on close)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "ps_preempt.py"
ROOT = SCRIPT.parents[2]  # the worktree: its hookbridge/ shadows the installed one
ENV = {
    **os.environ,
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "TF_ENABLE_ONEDNN_OPTS": "0",
    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
}


class ScenarioError(AssertionError):
    """The scenario did not reach a phase in time, or a process died unexpectedly."""


class Cluster:
    """Processes of one scenario, by name. Call ``close()`` at the end (in a ``finally``): it kills
    every process still running (its whole process group) and checks that none is left."""

    def __init__(self, out: Path, config: dict, deadline_s: float) -> None:
        self.out = out
        self.config = {**config, "out": str(out)}
        self.config_path = out / "config.json"
        self.config_path.write_text(json.dumps(self.config))
        self.procs: dict[str, subprocess.Popen] = {}
        self.killed: dict[str, float] = {}  # name -> time of its SIGKILL
        self.deadline = time.monotonic() + deadline_s
        self.leftovers: list[int] | None = None

    # -- processes --------------------------------------------------------------------------
    def start(self, name: str, *args: str) -> None:
        assert name not in self.procs, f"{name} started twice"
        with open(self.out / f"{name}.out", "w") as out, open(self.out / f"{name}.err", "w") as err:
            self.procs[name] = subprocess.Popen(
                [sys.executable, str(SCRIPT), str(self.config_path), *args],
                env=ENV,
                cwd=str(ROOT),
                stdout=out,
                stderr=err,
                start_new_session=True,
            )

    def kill(self, name: str) -> None:
        """SIGKILL to the process's group (as a preemption does), then reaps it."""
        proc = self.procs[name]
        self.killed[name] = time.time()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def wait(self, what: str, ready: Callable[[], bool], poll: float = 0.05) -> None:
        """Polls ``ready`` until it holds; fails when a process that was not killed died, or
        when the scenario's deadline passes."""
        while not ready():
            for name, proc in self.procs.items():
                if proc.poll() not in (None, 0) and name not in self.killed:
                    raise ScenarioError(
                        f"while waiting for {what}: {name} exited with {proc.returncode}\n"
                        f"{self.tail(name)}"
                    )
            if time.monotonic() > self.deadline:
                raise ScenarioError(f"deadline passed waiting for {what}\n{self.tails()}")
            time.sleep(poll)

    def finish(self, *names: str) -> None:
        """Waits for these processes to end by themselves, each with exit status 0."""
        self.wait(f"{names} to end", lambda: all(self.procs[n].poll() is not None for n in names))
        for name in names:
            assert self.procs[name].returncode == 0, f"{name} failed:\n{self.tail(name)}"

    # -- what the processes wrote ------------------------------------------------------------------
    def records(self, name: str) -> list[dict]:
        """The JSON lines of a worker's record. Only the last line of a killed process may be
        torn (cut by its death); it is dropped."""
        path = self.out / f"{name}.jsonl"
        if not path.exists():
            return []
        lines = path.read_text().split("\n")
        records = []
        for i, line in enumerate(lines):
            if not line:
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                if i == len(lines) - 1 and not line.endswith("}"):
                    continue  # still being written, or cut by a SIGKILL
                raise
        return records

    def gate(self, name: str, step: int | None) -> None:
        """Holds worker ``name`` before any run once the shared step reaches ``step``
        (``None``: never)."""
        path = self.out / f"gate-{name}"
        if step is None:
            path.unlink(missing_ok=True)
            return
        tmp = path.with_suffix(".tmp")
        tmp.write_text(str(step))
        os.replace(tmp, path)

    def tail(self, name: str, chars: int = 3000) -> str:
        return (self.out / f"{name}.err").read_text()[-chars:]

    def tails(self) -> str:
        return "\n".join(f"--- {n} ---\n{self.tail(n, 1500)}" for n in self.procs)

    # -- the end: nothing left ---------------------------------------------------------------------
    def close(self) -> None:
        """Kills whatever still runs (its whole group), then records in ``leftovers`` the
        scenario's process groups that still have a member (none, or the test fails)."""
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        self.leftovers = self._alive_groups(timeout=10.0)

    def _alive_groups(self, timeout: float) -> list[int]:
        """Process groups of this scenario that still have a member (each process led one),
        and any process whose command line names this scenario's config (wherever it went)."""
        end = time.monotonic() + timeout
        while True:
            alive = []
            for proc in self.procs.values():
                try:
                    os.killpg(proc.pid, 0)
                    alive.append(proc.pid)
                except ProcessLookupError:
                    pass
            alive += [pid for pid in self._pids_naming_config() if pid not in alive]
            if not alive or time.monotonic() > end:
                return alive
            time.sleep(0.1)

    def _pids_naming_config(self) -> list[int]:
        needle = str(self.config_path).encode()
        found: list[int] = []
        if not Path("/proc").is_dir():  # not Linux: the process groups are the check
            return found
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:  # ended meanwhile, or not ours to read
                continue
            if needle in cmdline:
                found.append(int(entry.name))
        return found
