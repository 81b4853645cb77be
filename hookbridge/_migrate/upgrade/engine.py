"""One file's stage-0 rewrite: hookbridge's rules, then TensorFlow's own upgrader, in one pass.

TensorFlow's ``ast_edits`` engine parses the file with ``pasta`` (which keeps formatting and
comments), lets the change spec *preprocess* the tree, then walks it with TF's rename tables.
:class:`_Spec` is TF's ``TFAPIChangeSpec`` whose preprocessing first applies
:mod:`hookbridge._migrate.upgrade.rules`: a name our rules rewrote is no longer one TF's tables
know, so theirs never undo ours. What TF's engine reports as not converted comes back as findings.
Files that need only renames (most) take :mod:`.fast`'s path instead, with the same result.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import io
import re
from dataclasses import dataclass, field

from hookbridge._migrate.upgrade import fast, model_fn_rules, rules

#: A log line of TF's engine: ``[path:]line:col: SEVERITY: message``.
_LOG = re.compile(r"^(?:.*?:)?(\d+):(\d+): (ERROR|WARNING|INFO): (.*)$", re.S)


#: The finding of a file TensorFlow's engine (``pasta``) cannot read: left as it is.
UNREADABLE = "not rewritten: TensorFlow's upgrader (pasta) cannot read this file"


@dataclass(frozen=True)
class Finding:
    """What the rewrite could not do (``ERROR``) or what a person should look at (``WARNING``)."""

    line: int
    severity: str
    message: str


@dataclass
class FileResult:
    """The rewrite of one file: the new text (``None`` when unchanged), what changed, findings."""

    path: str
    source: str
    text: str | None = None
    changes: list[rules.Change] = field(default_factory=list)
    renamed_by_tensorflow: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.text is not None and self.text != self.source


@functools.cache
def _spec_class() -> type:
    from hookbridge import _tfcompat

    tf_upgrade_v2, _ = _tfcompat.tf_upgrader()

    class _Spec(tf_upgrade_v2.TFAPIChangeSpec):
        """TF's spec with hookbridge's rules applied first (see the module docstring)."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            import pasta

            self._replace = pasta.ast_utils.replace_child
            self.hookbridge_changes: list[rules.Change] = []

        def preprocess(self, root_node, *args, **kwargs):
            self.hookbridge_changes = rules.apply(root_node, self._replace)
            return super().preprocess(root_node, *args, **kwargs)

        def clear_preprocessing(self) -> None:  # TF's re-runs __init__: keep what we did
            changes = self.hookbridge_changes
            super().clear_preprocessing()
            self.hookbridge_changes = changes

    return _Spec


#: The fields of TF's change spec whose keys are the dotted names its engine reacts to.
_SPEC_FIELDS = (
    "symbol_renames",
    "function_transformers",
    "function_keyword_renames",
    "function_reorders",
    "function_warnings",
    "function_arg_warnings",
    "change_to_function",
)


@functools.cache
def _triggers() -> tuple[frozenset[str], frozenset[str], tuple[str, ...], frozenset]:
    """What TF's engine reacts to: exact dotted names, call names of its ``*.name`` entries,
    deprecated module prefixes, and the ``(import, alias)`` pairs its import analysis reports."""
    from hookbridge import _tfcompat

    tf_upgrade_v2, _ = _tfcompat.tf_upgrader()
    spec = _spec_class()()
    exact: set[str] = set()
    globs: set[str] = set()
    for name in _SPEC_FIELDS:
        for key in getattr(spec, name, None) or {}:
            (globs.add(key[2:]) if key.startswith("*.") else exact.add(key))
    imports = frozenset(tf_upgrade_v2.TFAPIImportAnalysisSpec().imports_to_detect)
    return frozenset(exact), frozenset(globs), tuple(spec.module_deprecations), imports


@functools.cache
def _fast_spec():
    """One spec for the splicing path, which only reads its tables."""
    return _spec_class()()


def _parse_logs(lines: list[str], severities: tuple[str, ...]) -> list[Finding]:
    found = []
    for line in lines:
        match = _LOG.match(line)
        if match and match.group(3) in severities:
            found.append(Finding(int(match.group(1)), match.group(3), match.group(4).strip()))
    return found


def _tf2_already(finding: Finding, tree: ast.Module) -> bool:
    """A note of TF's engine about a call already written the TF 2 way: TF's dropout
    transformer reports ``tf.nn.dropout(x, rate=...)`` as "called without arguments" (it looks
    for ``keep_prob`` only), which would flag every upgraded file again on a second run."""
    if not finding.message.startswith("tf.nn.dropout called without arguments"):
        return False
    return any(
        isinstance(node, ast.Call)
        and node.lineno == finding.line
        and rules.dotted(node.func) is not None
        and rules.dotted(node.func).endswith("nn.dropout")
        and any(k.arg == "rate" for k in node.keywords)
        for node in ast.walk(tree)
    )


def _insert_imports(text: str, imports: list[str], alias_line: int) -> str:
    lines = text.splitlines(keepends=True)
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    lines[alias_line:alias_line] = [line + newline for line in imports]
    return "".join(lines)


def _tensorflow_import_end(text: str) -> int | None:
    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, ast.Import) and any(a.name in rules.ROOTS for a in node.names):
            return node.end_lineno
    return None


def upgrade_source(source: str, path: str = "<string>", *, model_fn: bool = False) -> FileResult:
    """The stage-0 rewrite of one module's text (nothing is written or imported); with
    ``model_fn``, then :mod:`.model_fn_rules` (``upgrade --model-fn``)."""
    result = _stage0(source, path)
    if model_fn:
        text, changes = model_fn_rules.rewrite(result.text or source)
        if changes:
            result.text = text
            result.changes = [*result.changes, *changes]
    return result


def _stage0(source: str, path: str) -> FileResult:
    result = FileResult(path, source)
    if "tensorflow" not in source:
        return result
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as error:
        result.findings.append(Finding(getattr(error, "lineno", 0) or 0, "ERROR", f"not rewritten: {error}"))
        return result
    spliced = fast.splice(source, tree, _fast_spec(), _triggers()[3])
    if spliced is not None:
        result.changes = spliced.changes
        result.renamed_by_tensorflow = spliced.renamed_by_tensorflow
        notes = [Finding(line, level, message.strip()) for line, level, message in spliced.notes]
        result.findings = [
            f for f in notes if f.severity in ("ERROR", "WARNING") and not _tf2_already(f, tree)
        ]
        if spliced.text != source:
            result.text = _with_imports(spliced.text)
        return result
    from hookbridge import _tfcompat

    _, ast_edits = _tfcompat.tf_upgrader()
    spec = _spec_class()()
    upgrader = ast_edits.ASTCodeUpgrader(spec)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # TF's engine prints every log line
            processed, text, logs, errors = upgrader.update_string_pasta(source, path)
    except Exception as error:  # noqa: BLE001 - pasta (Python 3.8-era) fails on newer syntax
        result.findings.append(
            Finding(0, "ERROR", f"{UNREADABLE} ({type(error).__name__}: {error}); rewrite it by hand")
        )
        return result
    if not processed:
        detail = "\n".join(errors or logs).strip().splitlines()
        result.findings.append(
            Finding(0, "ERROR", f"not rewritten: the file does not parse ({detail[-1] if detail else ''})")
        )
        return result
    result.changes = list(spec.hookbridge_changes)
    result.renamed_by_tensorflow = sum(1 for line in logs if ": INFO: Renamed" in line)
    result.findings = [f for f in _parse_logs(errors, ("ERROR", "WARNING")) if not _tf2_already(f, tree)]
    if text != source:
        result.text = _with_imports(text)
    return result


def _with_imports(text: str) -> str:
    """``text`` with the imports its new spellings need, after ``import tensorflow as tf``."""
    missing = rules.needed_imports(text)
    end = _tensorflow_import_end(text) if missing else None
    if missing and end is not None:
        text = _insert_imports(text, missing, end)
    return text


@functools.lru_cache(maxsize=4096)
def _call_changed(alias: str, call: str) -> bool:
    """Whether TF's engine (with our rules first) rewrites ``call`` (a call's source text, in a
    module importing TensorFlow as ``alias``)."""
    source = f"import tensorflow as {alias}\n_ = (\n{call}\n)\n"
    result = upgrade_source(source)
    return result.text is not None and result.text != source


def stage0_names(source: str, path: str = "<string>") -> list[tuple[int, str, str]]:
    """``(line, name as written, replacement or note)``: every TF1-only name :func:`upgrade_source`
    would rewrite in ``source`` (see :func:`hookbridge._migrate.upgrade.fast.stage0_names`).

    Imports TensorFlow (its rename tables); raises ImportError when it is not installed.
    Raises SyntaxError/ValueError when ``source`` does not parse.
    """
    if "tensorflow" not in source:
        return []
    tree = ast.parse(source, filename=path)
    return fast.stage0_names(source, tree, _fast_spec(), _call_changed)
