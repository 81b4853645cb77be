"""What one side of ``check --replaced-by`` logged, warned and printed: the lines a user compares.

:func:`captured` records, while its block runs:

* every ``logging`` record of every logger (the user's ``logging.getLogger("team.hooks")``,
  TensorFlow's ``tf.compat.v1.logging``, absl), at every level from DEBUG up, whatever levels,
  handlers and ``propagate`` flags the process configured: check compares what the code emits,
  not what one logging configuration shows. Levels are lowered, ``logging.disable`` lifted and
  every handler muted for the block only, then restored;
* every ``warnings.warn`` the process's warning filters let through (``UserWarning`` by default);
* what is written to ``sys.stdout`` and ``sys.stderr``.

A line is *noise*, left out on both sides alike and kept apart (:attr:`Capture.ignored`), when
the code that emitted it is the machinery around the hook or callback rather than the hook or
callback itself:

* hookbridge's own modules (the bridge's session scaffold, its notes ``HookCallback: ...``);
* TensorFlow's deprecation machinery (``tensorflow/python/util/``): a deprecation notice is
  printed once per process, on whichever side first calls the function, so it says nothing
  about either side;
* a ``warnings.warn`` from any module but the user's (TensorFlow's, Keras's, numpy's advice on
  how code is written: "Cannot activate TF2 compatibility support for TF1 summary ops", ...);
* a log record from TensorFlow's, Keras's, absl's or Python's own modules, unless the function
  that logged it, or its caller, is the user's code (any file outside those packages) or a
  method of a ``SessionRunHook`` or a Keras ``Callback`` (built-in ones included: what
  ``LoggingTensorHook`` logs is what the hook does) other than hookbridge's and than what
  ``fit`` adds itself (``CallbackList``, ``History``, ``ProgbarLogger``). So the session
  scaffold's "Graph was finalized." and tf_keras's "Callback method ... is slow compared to the
  batch time" (a measure of the machine, from ``CallbackList``) are noise;
  ``CheckpointSaverHook``'s "Saving checkpoints for 3 ..." is the hook's.

Lines are normalized: the run's folder becomes ``<dir>``, durations ``<secs>``, rates
``<rate>``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import os
import re
import sys
import sysconfig
import threading
import warnings
from collections.abc import Callable, Iterator
from importlib import util as importlib_util
from typing import Any

__all__ = ["Capture", "captured", "inside"]

_DURATION = re.compile(r"\d+(\.\d+)?(e[-+]?\d+)? ?(sec|secs|seconds|s)\b")
_RATE = re.compile(r"(/sec|per second)(: | = |:)[-+\d.e]+")
#: The packages whose modules are machinery (TensorFlow, Keras, their helpers), not user code.
_FRAMEWORK_PACKAGES = (
    "tensorflow", "tensorflow_estimator", "keras", "tf_keras", "tensorboard", "absl", "numpy",
    "google", "h5py", "optree", "ml_dtypes", "wrapt", "hookbridge",
)
_HOOKBRIDGE = os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep
#: The bridge's notes to the user, whatever module they are attributed to.
_BRIDGE_PREFIXES = ("HookCallback:", "CallbackHook:", "hookbridge:")


@dataclasses.dataclass
class Capture:
    """The lines of one run, in order (``"<LEVEL>: text"``, ``"warning: Category: text"``,
    ``"stdout: text"``, ``"stderr: text"``), and those left out as noise (same form)."""

    lines: list[str] = dataclasses.field(default_factory=list)
    ignored: list[str] = dataclasses.field(default_factory=list)


def _package_dirs() -> tuple[str, ...]:
    dirs = set()
    for name in _FRAMEWORK_PACKAGES:
        try:
            spec = importlib_util.find_spec(name)
        except (ImportError, ValueError):
            continue
        for location in (spec.submodule_search_locations or []) if spec else []:
            dirs.add(os.path.realpath(location) + os.sep)
    for key in ("stdlib", "platstdlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(os.path.realpath(path) + os.sep)
    dirs.add(_HOOKBRIDGE)
    return tuple(sorted(dirs))


def _tf_util_dir() -> str | None:
    spec = importlib_util.find_spec("tensorflow")
    locations = list(spec.submodule_search_locations or []) if spec else []
    return os.path.join(os.path.realpath(locations[0]), "python", "util") + os.sep if locations else None


class _Origins:
    """Decides whose doing a line is (see the module docstring)."""

    def __init__(self, boundary: Any) -> None:
        import tensorflow as tf

        self.framework = _package_dirs()
        self.tf_util = _tf_util_dir()
        self.boundary = boundary
        keras = tf.keras.callbacks
        self.actors = (tf.compat.v1.train.SessionRunHook, keras.Callback)
        self.fit_own = tuple(
            getattr(keras, name) for name in ("CallbackList", "History", "ProgbarLogger")
            if hasattr(keras, name)
        )
        self._abspath: dict[str, str] = {}

    def _path(self, filename: str) -> str:
        path = self._abspath.get(filename)
        if path is None:
            path = self._abspath[filename] = os.path.realpath(filename)
        return path

    def user_code(self, filename: str) -> bool:
        return not filename.startswith("<") and not self._path(filename).startswith(self.framework)

    def _acts(self, frame: Any) -> bool:
        """Whether ``frame`` is a method of a hook or a callback (not hookbridge's, not what
        ``fit`` adds itself)."""
        if frame.f_code.co_varnames[:1] != ("self",):
            return False
        owner = frame.f_locals.get("self")
        return (
            isinstance(owner, self.actors)
            and not isinstance(owner, self.fit_own)
            and not type(owner).__module__.startswith("hookbridge")
        )

    def why_noise(self, filename: str, frame: Any, message: str, *, warning: bool) -> str | None:
        """``None`` if the line is the hook's or callback's doing, else why it is noise.

        Args:
            filename: the file of the code that emitted it (the record's ``pathname``, the
                caller of ``warnings.warn``).
            frame: that code's frame, if found (then its caller is looked at too).
            message: the line.
            warning: a ``warnings.warn`` (kept only from the user's own code).
        """
        path = self._path(filename or "")
        if message.startswith(_BRIDGE_PREFIXES) or path.startswith(_HOOKBRIDGE):
            return "hookbridge"
        if self.tf_util and path.startswith(self.tf_util):
            return "tensorflow deprecation"
        if self.user_code(path):
            return None
        if warning or frame is None:
            return "framework"
        for f in (frame, frame.f_back):
            if f is not None and f.f_code is not self.boundary and (
                self.user_code(f.f_code.co_filename) or self._acts(f)
            ):
                return None
        return "framework"


def _emitter(frame: Any, record: logging.LogRecord) -> Any:
    """The frame that logged ``record`` (its ``pathname``, ``funcName``, ``lineno``), or None."""
    while frame is not None:
        code = frame.f_code
        if (
            frame.f_lineno == record.lineno
            and code.co_name == record.funcName
            and code.co_filename == record.pathname
        ):
            return frame
        frame = frame.f_back
    return None


def inside(fn: Callable[[], Any]) -> Any:
    """Calls ``fn``: the frame where :func:`captured` stops looking for the code behind a line."""
    return fn()


def _normalize(line: str, folder: str) -> str:
    line = line.replace(os.path.realpath(folder), "<dir>").replace(folder, "<dir>")
    line = _RATE.sub(r"\1\2<rate>", line)
    return _DURATION.sub("<secs>", line)


@contextlib.contextmanager
def _loud_logging(factory: Callable[..., logging.LogRecord]) -> Iterator[None]:
    """Every logger emits from DEBUG up into ``factory`` and no handler writes anything."""
    manager = logging.root.manager
    loggers = [logging.root] + [
        lg for lg in list(manager.loggerDict.values()) if isinstance(lg, logging.Logger)
    ]
    saved = [(lg, lg.level, lg.handlers, lg.propagate, lg.disabled) for lg in loggers]
    disabled = manager.disable
    old_factory = logging.getLogRecordFactory()
    logging.setLogRecordFactory(factory)
    logging.disable(logging.NOTSET)
    try:
        for lg in loggers:
            lg.handlers = [logging.NullHandler()] if lg is logging.root else []
            lg.propagate, lg.disabled = True, False
            if lg is logging.root or lg.level != logging.NOTSET:
                lg.setLevel(logging.DEBUG)
        yield
    finally:
        for lg, level, handlers, propagate, was_disabled in saved:
            lg.handlers, lg.propagate, lg.disabled = handlers, propagate, was_disabled
            lg.setLevel(level)
        logging.disable(disabled)
        logging.setLogRecordFactory(old_factory)


@contextlib.contextmanager
def captured(capture: Capture, folder: str) -> Iterator[None]:
    """Records into ``capture`` what the block logs, warns and prints (module docstring); code
    run through :func:`inside` is looked at up to that call."""
    origins = _Origins(inside.__code__)
    lock = threading.Lock()
    old_factory = logging.getLogRecordFactory()

    def add(kind: str, text: str, noise: str | None) -> None:
        with lock:
            target = capture.lines if noise is None else capture.ignored
            for line in text.splitlines() or [""]:
                target.append(_normalize(f"{kind}: {line}", folder))

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = old_factory(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - logging reports it when a handler formats it
            message = str(record.msg)
        if record.exc_info and record.exc_info[1] is not None:
            e = record.exc_info[1]
            message += f"\n{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        emitter = _emitter(sys._getframe(1), record)
        add(record.levelname, message, origins.why_noise(record.pathname, emitter, message,
                                                         warning=False))
        return record

    def showwarning(message: Any, category: type, filename: str, lineno: int, *_: Any) -> None:
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename == warnings.__file__:
            frame = frame.f_back  # warnings.py's own frames: the caller of warn() is next
        origin = frame.f_code.co_filename if frame is not None else filename
        text = str(message)
        noise = origins.why_noise(origin, frame, text, warning=True)
        add(f"warning: {category.__name__}", text, noise)

    out, err = _Lines("stdout", add), _Lines("stderr", add)
    try:
        with warnings.catch_warnings(), _loud_logging(factory):
            warnings.showwarning = showwarning
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                yield
    finally:
        out.flush_partial()
        err.flush_partial()


class _Lines(io.TextIOBase):
    """A text stream whose complete lines go to ``add(kind, line, None)`` as they are written
    (so printed lines keep their place among log lines)."""

    def __init__(self, kind: str, add: Callable[[str, str, str | None], None]) -> None:
        super().__init__()
        self.kind, self.add, self.partial = kind, add, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        lines = (self.partial + text).split("\n")
        self.partial = lines.pop()
        for line in lines:
            self.add(self.kind, line, None)
        return len(text)

    def flush_partial(self) -> None:
        if self.partial:
            self.add(self.kind, self.partial, None)
            self.partial = ""
