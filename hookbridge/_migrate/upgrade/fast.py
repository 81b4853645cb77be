"""The same rewrite without ``pasta``, for files where it is only renames.

TensorFlow's engine parses every file with ``pasta`` (a formatting-preserving parser): 0.3-2 s
for a 200-line file on this 2-core machine, where Python's own parser takes a few milliseconds.
Most of what stage 0 does is renaming dotted names (``tf.logging.info`` ->
``tf.compat.v1.logging.info``), which needs no reformatting: the new name is spliced into the
source text at the node's position. This module does that with TF's own tables and our rules,
emits TF's notes for the names it renames as TF's engine words them, and gives up (returns None:
the caller runs TF's engine) wherever TF's engine would do more than rename: a transformer, a
keyword or argument-order change, an argument warning, a deprecated module, a name spread over
lines. ``tests/test_upgrade.py`` checks that both paths give the same text and findings.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from hookbridge._migrate.upgrade import rules


class _NeedsEngine(Exception):
    """Something TF's engine would change beyond a rename."""


@dataclass
class Spliced:
    """The result of the fast path: new text, our changes, TF's rename count, TF's notes."""

    text: str
    changes: list[rules.Change]
    renamed_by_tensorflow: int
    notes: list[tuple[int, str, str]]  # (line, severity, message)


class _Splicer:
    def __init__(self, source: str, spec, alias: str, root: str, module_main: bool) -> None:
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))
        self.source = source
        self.spec = spec
        self.alias, self.root = alias, root
        self.module_main = module_main
        self.spans: list[tuple[int, int, str]] = []
        self.changes: list[rules.Change] = []
        self.renamed = 0
        self.notes: list[tuple[int, str, str]] = []

    # positions -------------------------------------------------------------------------------
    def offset(self, line: int, col: int) -> int:
        text = self.lines[line - 1]
        return self.starts[line - 1] + len(text.encode("utf-8")[:col].decode("utf-8"))

    def start(self, node: ast.AST) -> int:
        return self.offset(node.lineno, node.col_offset)

    def end(self, node: ast.AST) -> int:
        return self.offset(node.end_lineno, node.end_col_offset)

    # names -----------------------------------------------------------------------------------
    def canonical(self, name: str | None) -> str | None:
        if not name:
            return None
        head, _, rest = name.partition(".")
        if head != self.alias:
            return None
        return f"{self.root}.{rest}" if rest else self.root

    def spelled(self, name: str) -> str | None:
        if not name.startswith("tf."):
            return name
        if name == self.root or name.startswith(self.root + "."):
            return self.alias + name[len(self.root) :]
        return None

    # the walk --------------------------------------------------------------------------------
    def visit(self, node: ast.AST) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if _reported_import(node, self.imports):
                raise _NeedsEngine  # TF's engine reports it (and then renames nothing)
            return
        if isinstance(node, ast.Call):
            self.call(node)
            return
        if isinstance(node, ast.Attribute):
            self.attribute(node)
            return
        for child in ast.iter_child_nodes(node):
            self.visit(child)

    def call(self, node: ast.Call) -> None:
        written = rules.dotted(node.func)
        name = self.canonical(written)
        if name in ("tf.app.run", "tf.compat.v1.app.run"):
            self.spans.append((self.start(node.func), self.end(node.func), "absl.app.run"))
            main = not node.args and not node.keywords and self.module_main
            if main:
                close = self.end(node) - 1
                if self.source[close] != ")" or self.source[self.end(node.func) : close].strip() != "(":
                    raise _NeedsEngine
                self.spans.append((close, close, "main"))
            self.changes.append(
                rules.Change(
                    node.lineno, name, "absl.app.run(main)" if main or node.args else "absl.app.run",
                    "tf.app was absl's, and is gone from TF 2",
                )
            )
            for arg in [*node.args, *node.keywords]:
                self.visit(arg)
            return
        self.check_call(node, self.tf_name(node.func))
        self.visit(node.func)
        for arg in [*node.args, *node.keywords]:
            self.visit(arg)

    def tf_name(self, func: ast.AST) -> str | None:
        """The name TF's engine sees for ``func`` after our rules ran (it reads ``tf.``)."""
        written = rules.dotted(func)
        if written is None:
            return None
        rule = rules.lookup(self.canonical(written)) if self.canonical(written) else None
        if rule is not None:
            return self.spelled(rule.new)
        return written

    def check_call(self, node: ast.Call, full: str | None) -> None:
        spec = self.spec
        if full:
            name = full.split(".")[-1]
        elif isinstance(node.func, ast.Name):
            name = node.func.id
        elif isinstance(node.func, ast.Attribute):
            name = node.func.attr
        else:
            name = None
        glob = "*." + name if name else None
        for field in ("function_transformers", "function_keyword_renames", "function_arg_warnings"):
            table = getattr(spec, field, {}) or {}
            if full in table or glob in table or "*" in table:
                if field == "function_keyword_renames":
                    renames = {**table.get("*", {}), **table.get(glob, {}), **table.get(full, {})}
                    star = any(k.arg is None for k in node.keywords)
                    if not star and not any(k.arg in renames for k in node.keywords):
                        continue
                raise _NeedsEngine
        if full in spec.function_reorders:
            positional = [a for a in node.args if not isinstance(a, ast.Starred)]
            starred = len(positional) != len(node.args)
            if starred or any(spec.function_reorders[full][i] for i in range(len(positional))):
                raise _NeedsEngine
        if isinstance(node.func, ast.Attribute) and glob in spec.function_warnings:
            self.warn(node, glob)

    def warn(self, node: ast.AST, full: str) -> None:
        level, message = self.spec.function_warnings[full]
        message = message.replace("<function name>", full)
        self.notes.append((node.lineno, level, f"{full} requires manual check. {message}"))

    def attribute(self, node: ast.Attribute) -> None:
        if rules._is_dimension_value(node):
            call = self.spelled("tf.compat.v1.dimension_value")
            self.spans.append((self.start(node), self.start(node), f"{call}("))
            self.spans.append((self.end(node.value), self.end(node), ")"))
            self.changes.append(
                rules.Change(
                    node.lineno, "<dim>.value", "tf.compat.v1.dimension_value(<dim>)",
                    "a TF 2 TensorShape dimension is an int (or None), not a Dimension: "
                    "dimension_value reads both",
                )
            )
            self.visit(node.value)
            return
        # hookbridge's rule on the outermost level that has one (as rules._Rewriter does) ...
        chain = self.chain(node)
        for level in chain:
            name = self.canonical(rules.dotted(level))
            rule = rules.lookup(name) if name else None
            new = self.spelled(rule.new) if rule else None
            if new is not None:
                self.splice(level, new)
                self.changes.append(rules.Change(level.lineno, rule.old, rule.new, rule.why))
                # ... then TF's engine sees the enclosing levels under their new names
                self.tf_levels(chain[: chain.index(level)], level, new)
                self.visit_inner(chain[-1])
                return
        self.tf_levels(chain, None, None)
        self.visit_inner(chain[-1])

    def chain(self, node: ast.Attribute) -> list[ast.Attribute]:
        levels = []
        current: ast.AST = node
        while isinstance(current, ast.Attribute):
            levels.append(current)
            current = current.value
        return levels

    def visit_inner(self, innermost: ast.Attribute) -> None:
        if not isinstance(innermost.value, ast.Name):
            self.visit(innermost.value)

    def tf_levels(self, levels: list[ast.Attribute], renamed: ast.AST | None, new: str | None) -> None:
        """TF's visitor on the chain's levels, outermost first: a note, then a rename."""
        for level in levels:
            written = rules.dotted(level)
            if written is None:
                return
            if renamed is not None:
                old = rules.dotted(renamed)
                written = new + written[len(old) :]
            if written in self.spec.function_warnings:
                self.warn(level, written)
            target = self.spec.symbol_renames.get(written)
            if target:
                self.splice(level, target, renamed=renamed is not None)
                self.renamed += 1
                return
            if any(written == m for m in self.spec.module_deprecations):
                raise _NeedsEngine

    def splice(self, node: ast.AST, new: str, renamed: bool = False) -> None:
        start, end = self.start(node), self.end(node)
        if renamed:  # an enclosing level over a name we already rewrote: replace it whole
            self.spans = [s for s in self.spans if not (start <= s[0] and s[1] <= end)]
        elif self.source[start:end] != rules.dotted(node):
            raise _NeedsEngine  # spaces, comments or line breaks inside the name
        self.spans.append((start, end, new))

    def text(self) -> str:
        out, position = [], 0
        for start, end, new in sorted(self.spans, key=lambda s: (s[0], s[1])):
            if start < position:
                raise _NeedsEngine
            out.append(self.source[position:start])
            out.append(new)
            position = end
        out.append(self.source[position:])
        return "".join(out)


def _reported_import(node: ast.Import | ast.ImportFrom, imports: frozenset) -> bool:
    if isinstance(node, ast.Import):
        return any((a.name, a.asname) in imports for a in node.names)
    return bool(node.module) and any(
        (f"{node.module}.{a.name}", a.asname) in imports for a in node.names
    )


def splice(source: str, tree: ast.Module, spec, imports: frozenset) -> Spliced | None:
    """The rewrite of ``source`` by splicing names, or None where TF's engine must run.

    ``spec`` is TF's change spec (its tables are read, never changed); ``imports`` the
    ``(module, alias)`` pairs TF's import analysis reports.
    """
    found = rules.tensorflow_alias(tree)
    alias, root = found if found else ("\0", "tf")
    splicer = _Splicer(source, spec, alias, root, rules.has_main(tree))
    splicer.imports = imports
    try:
        splicer.visit(tree)
        text = splicer.text()
    except _NeedsEngine:
        return None
    return Spliced(text, splicer.changes, splicer.renamed, splicer.notes)


class _Names(_Splicer):
    """The splicer's walk that records what it would rename instead of giving up.

    A call TF's engine would do more than rename (a transformer, a keyword or argument-order
    change) is checked by running TF's engine on that call's text alone (``changed_call``): a
    row when the engine would change it, so an upgraded call (``tf.nn.dropout(x, rate=...)``)
    gives none.
    """

    def __init__(self, *args, changed_call) -> None:
        super().__init__(*args)
        self.changed_call = changed_call
        self.rows: dict[tuple[int, int], tuple[int, str, str]] = {}

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return
        super().visit(node)

    def check_call(self, node: ast.Call, full: str | None) -> None:
        try:
            super().check_call(node, full)
        except _NeedsEngine:
            segment = ast.get_source_segment(self.source, node)
            if segment is not None and self.changed_call(self.alias, segment):
                name = rules.dotted(node.func) or full or "call"
                self.rows[(self.start(node), -1)] = (
                    node.lineno, f"{name}(...)", "arguments rewritten by the upgrade"
                )

    def attribute(self, node: ast.Attribute) -> None:
        if rules._is_dimension_value(node):
            inner = ast.get_source_segment(self.source, node.value) or "<dim>"
            self.rows[(self.start(node), self.end(node))] = (
                node.lineno, f"{inner}.value", f"tf.compat.v1.dimension_value({inner})"
            )
        super().attribute(node)

    def tf_levels(self, levels, renamed, new) -> None:
        try:
            super().tf_levels(levels, renamed, new)
        except _NeedsEngine:
            return  # a deprecated module: not renamed (scan's removed-spelling rows name it)

    def splice(self, node: ast.AST, new: str, renamed: bool = False) -> None:
        start, end = self.start(node), self.end(node)
        if renamed:
            self.rows = {k: v for k, v in self.rows.items() if not (start <= k[0] and k[1] <= end)}
        old = rules.dotted(node) or self.source[start:end]
        if old != new:
            self.rows[(start, end)] = (node.lineno, old, new)


def stage0_names(source: str, tree: ast.Module, spec, changed_call) -> list[tuple[int, str, str]]:
    """``(line, name as written, replacement or note)`` for every TF1-only name the stage-0
    rewrite would touch in ``source``, in source order (nothing is rewritten).

    ``changed_call(alias, call_text)`` tells whether TF's engine would rewrite a call whose
    arguments it transforms. ``[]`` when the module does not import TensorFlow.
    """
    found = rules.tensorflow_alias(tree)
    if not found:
        return []
    names = _Names(source, spec, *found, rules.has_main(tree), changed_call=changed_call)
    names.imports = frozenset()
    names.visit(tree)
    rows = list(names.rows.values())
    for change in names.changes:
        if change.old.endswith("app.run"):
            rows.append((change.line, change.old, change.new))
    return sorted(set(rows))
