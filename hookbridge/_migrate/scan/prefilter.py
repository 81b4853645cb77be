"""Which files the scan must read, told from their text before any syntax tree is built.

Building syntax trees is most of a scan's cost, and most files of a large TF1 project are layers,
data and numeric code that cannot hold a finding. A file is *read* (parsed and walked, then
analysed) when its text holds a name the analysis reacts to (:func:`vocabulary`: the catalog's
entry points, hooks, callbacks and tensor reads, ``Hook``, ``estimator``, ``contrib``,
``callbacks``, ``minimize``, ``class``, the calls that turn eager execution off), or the name of
a scanned hook or callback class or of a function that builds one (known only once the files
defining them are read: :func:`hookbridge._migrate.scan.scan` reads in stages). Any other file
is only syntax-checked by the same parser (:func:`parses`), so a parse error is still reported;
it is parsed later only if a module that is read takes a constant from it.

Why such a file cannot hold a finding: every finding starts from a class statement, from a call
whose last name, keyword or resolved name is one of those names (a call with keywords is looked
at, but only an entry point, a ``callbacks=`` keyword, a hook, a callback or a scanned class or
factory gives a row), from an import or attribute chain through ``estimator``/``contrib``, or
from ``minimize``; the name a call resolves to ends with a word written in the file (an import,
an assignment or the call itself), and an import resolves to a removed spelling through its text
or, for a relative import, through the file's path (read when it holds ``estimator`` or
``contrib``). A call of a scanned class that is neither a hook nor a
callback (or of a function building one) gives no row, so only hook and callback classes' names
count; every class is known all the same (a file with ``class`` is read in the first stage), so
a name two classes share stays ambiguous, as when every file is read. Identifiers are compared as written, so a file that is not
pure ASCII (NFKC folds ``ｆｉｔ`` into ``fit``) or declares an encoding other than UTF-8, Latin-1
or ASCII is always read.
"""

from __future__ import annotations

import codecs
import functools
import re
import symtable
from typing import Final

from hookbridge._migrate.scan import catalog
from hookbridge._migrate.scan.walk import EAGER_OFF

#: Parts of names tested anywhere in the text (a call's ``...Hook``; ``tensorflow_estimator``).
SUBSTRINGS: Final = (b"Hook", b"estimator", b"contrib")
#: Parts of a file's path that its relative imports carry into a removed spelling.
_PATH_PARTS: Final = ("estimator", "contrib")
#: Names the analysis reacts to besides the catalog's (tests/test_scan_prefilter.py pins them).
_WORDS: Final = frozenset({"class", "callbacks"}) | EAGER_OFF

_NOT_IDENTIFIER: Final = bytes(
    c if chr(c).isascii() and (chr(c).isalnum() or c == ord("_")) else ord(" ") for c in range(256)
)
#: Line ends as the tokenizer reads them, and PEP 263's declaration on one of the first two lines.
_NEWLINE: Final = re.compile(rb"\r\n|\r|\n")
_CODING: Final = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.MULTILINE)
_SAME_AS_ASCII: Final = frozenset({"utf-8", "iso8859-1", "ascii", "cp1252"})


@functools.cache
def vocabulary() -> frozenset[bytes]:
    """Every whole name that makes a file worth reading (encoded, to compare with bytes)."""
    names = (
        catalog.relevant_names()
        | catalog.CUSTOM_LOOP_NAMES
        | catalog.TRAIN_OP_METHODS
        | catalog.ESTIMATOR_CLASSES
        | _WORDS
    )
    return frozenset(name.encode() for name in names)


def words_if_unneeded(source: bytes, rel: str) -> frozenset[bytes] | None:
    """None when the file must be read; else the identifiers (and numbers) written in it, to
    compare with the names of scanned classes and factories once those are known.

    A file must be read when its text holds a name of :func:`vocabulary` or one of
    :data:`SUBSTRINGS`, is not pure ASCII, or declares an encoding that could spell a name
    differently; or when its path (``rel``, relative to the scanned root) holds ``estimator`` or
    ``contrib``: its relative imports then resolve to a removed spelling
    (``tensorflow/contrib/tpu/x.py``: ``from . import util`` is ``tensorflow.contrib.tpu.util``).
    """
    if not source.isascii() or any(part in source for part in SUBSTRINGS):
        return None
    if any(part in rel for part in _PATH_PARTS):
        return None
    head = b"\n".join(_NEWLINE.split(source, 2)[:2])
    for declared in _CODING.findall(head):
        try:
            if codecs.lookup(declared.decode()).name not in _SAME_AS_ASCII:
                return None
        except LookupError:
            return None  # the parser reports it
    names = frozenset(source.translate(_NOT_IDENTIFIER).split())
    return None if not names.isdisjoint(vocabulary()) else names


def parses(source: bytes, filename: str) -> bool:
    """True when :func:`ast.parse` would accept ``source``; False when it may not.

    :mod:`symtable` runs the same parser (same flags, same encoding rules) without building the
    Python syntax tree, in about half the time; it rejects a little more (``nonlocal`` at module
    level, a duplicate argument), so False only says: parse it to know.
    """
    try:
        symtable.symtable(source, filename, "exec")
    except Exception:  # noqa: BLE001 - any refusal: ast.parse gives the verdict
        return False
    return True
