"""Processes for the distributed tests: free loopback ports, and commands run to completion in
sessions of their own with a bounded time and nothing left behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on 127.0.0.1 (bound together, so no two are the same)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def run_processes(commands: list[tuple[list[str], dict]], timeout: float) -> list[dict]:
    """Starts every command in a session of its own, waits at most ``timeout`` seconds in all,
    kills whatever is left (and fails), and returns each process's last JSON line."""
    procs = [
        subprocess.Popen(
            argv,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for argv, env in commands
    ]
    outputs, timed_out = [], []
    try:
        for proc in procs:
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out.append(proc.args)
                continue
            lines = [ln for ln in out.splitlines() if ln.startswith("{")]
            assert proc.returncode == 0 and lines, (
                f"{proc.args} failed:\n{out[-2000:]}\n{err[-4000:]}"
            )
            outputs.append(json.loads(lines[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
    assert not timed_out, f"still running after {timeout} s (killed): {timed_out}"
    assert all(p.poll() is not None for p in procs)
    return outputs


@contextlib.contextmanager
def background(commands: list[tuple[list[str], dict]]) -> Iterator[list[subprocess.Popen]]:
    """Starts processes that never end by themselves (parameter servers: ``server.join()``),
    each in a session of its own; at exit kills each session and checks that nothing of it is
    left."""
    procs = [
        subprocess.Popen(
            argv,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for argv, env in commands
    ]
    try:
        yield procs
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        for proc in procs:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                continue
            raise AssertionError(f"a process of {proc.args} is still running after SIGKILL")
