"""TensorFlow's graph, session and eager-context internals: fetch mapping, the cached
global-step read, reusable ``graph_default`` / ``eager`` scopes, the default session,
``SessionRunValues`` built in C, summary ops left without a writer, a fresh TF1 variable
store, TF1 tensor equality and captured handles for a ``model_fn`` traced in a
``tf.function``, and the name scope a variable takes in a TF1 graph.

Part of :mod:`hookbridge._tfcompat` (see its docstring).
"""

from __future__ import annotations

import functools
from typing import Any

import tensorflow as tf
from tensorflow.python.client import session as _tf_session
from tensorflow.python.eager import context as _eager_context
from tensorflow.python.framework import ops as _ops
from tensorflow.python.framework import stack as _stack
from tensorflow.python.training import training_util as _training_util

#: Private symbols used, as (module, attribute), checked by tests/test_tfcompat.py.
PRIVATE_SYMBOLS = (
    (_tf_session, "_FetchMapper"),
    (_training_util, "_get_or_create_global_step_read"),
    (_eager_context, "eager_mode"),
    (_ops, "_default_graph_stack"),
    (_eager_context, "ContextSwitch"),
    (_eager_context, "_context"),
    (_stack, "default_session"),
)


def fetch_mapper(fetches: Any) -> Any:
    """TF's own mapper from a nested fetch structure to unique graph elements and back.

    Must be called with the graph the fetches belong to as the default graph. Returns an object
    with ``unique_fetches()`` and ``build_results(values)``; raises TF's own TypeError/ValueError.
    """
    return _tf_session._FetchMapper.for_fetch(fetches)


def global_step_read_tensor(graph: tf.Graph) -> tf.Tensor:
    """The cached ``global_step + 0`` read tensor that built-in hooks fetch (created on demand)."""
    return _training_util._get_or_create_global_step_read(graph)


#: The op TF 2 leaves in a graph for a ``tf.summary.*`` call made while no default writer was
#: set (the call becomes a constant ``False``): ``<name>/write_summary/Const``. An op name, not an
#: API: tests/test_tfcompat.py pins it.
UNBOUND_SUMMARY_OP_SUFFIX = "write_summary/Const"


def unbound_summary_ops(graph: tf.Graph) -> list[str]:
    """Names of ``tf.summary.*`` calls in ``graph`` that were made without a default writer."""
    suffix = "/" + UNBOUND_SUMMARY_OP_SUFFIX
    return [
        op.name[: -len(suffix)]
        for op in graph.get_operations()
        if op.type == "Const" and op.name.endswith(suffix)
    ]


class _ContextObjects:
    """The eager context and two of its objects, looked up once per scope object (again only if
    TF replaces its context): its per-thread data (one object; per-thread inside) and its
    context-switch stack (a threading.local)."""

    __slots__ = ("_ctx", "_local", "_switches")

    def __init__(self) -> None:
        self._ctx: Any = None
        self._local: Any = None
        self._switches: Any = None

    def _look_up(self) -> None:
        ctx = self._ctx = _eager_context.context()  # creates the context on first use
        self._local, self._switches = ctx._thread_local_data, ctx.context_switches


class GraphScope(_ContextObjects):
    """A reusable ``graph_default`` for one graph, for the bridge's per-step hook calls.

    ``with scope:`` does what ``with graph.as_default():`` does, with the context-switch record
    built once (rebuilt only if this thread's device stack changes) and no object allocated per
    entry: the bridge enters its graph twice per Keras step, right after TF's step has evicted
    the CPU caches, where every attribute lookup counts. Nesting is allowed; use one scope from one
    thread at a time (the thread Keras calls callbacks on). ``tests/test_tfcompat.py`` checks it
    against ``Graph.as_default``.
    """

    __slots__ = ("_device_stack", "_saved", "_switch", "graph")

    def __init__(self, graph: tf.Graph) -> None:
        super().__init__()
        self.graph = graph
        self._saved: list = []
        self._switch: Any = None
        self._device_stack: Any = None

    def __enter__(self) -> tf.Graph:
        g = self.graph
        if _eager_context._context is not self._ctx or self._ctx is None:
            self._look_up()  # first use, or TF replaced its context
        device_stack = g._device_function_stack
        switch = self._switch
        if switch is None or self._device_stack is not device_stack:
            self._device_stack = device_stack
            switch = self._switch = _eager_context.ContextSwitch(
                g.building_function, g.as_default, device_stack
            )
        self._switches.stack.append(switch)
        _ops._default_graph_stack.stack.append(g)
        local = self._local
        self._saved.append(local.is_eager)
        local.is_eager = False
        return g

    def __exit__(self, *exc: object) -> None:
        self._local.is_eager = self._saved.pop()
        stack = _ops._default_graph_stack.stack
        if stack:
            if stack[-1] is not self.graph:
                raise AssertionError("Nesting violated for the default graph stack")
            stack.pop()
        self._switches.stack.pop()


class EagerScope(_ContextObjects):
    """A reusable ``eager()`` (nesting allowed; one thread at a time): CallbackHook enters eager
    mode for its callbacks on every step. Like ``GraphScope`` it looks the eager context's
    objects up once and allocates nothing per entry."""

    __slots__ = ("_saved",)

    _SWITCH = None  # one ContextSwitch record for every scope: it holds no state

    def __init__(self) -> None:
        super().__init__()
        self._saved: list = []

    def __enter__(self) -> None:
        if _eager_context._context is not self._ctx or self._ctx is None:
            self._look_up()  # first use, or TF replaced its context
        local = self._local
        self._saved.append(local.is_eager)
        local.is_eager = True
        switch = EagerScope._SWITCH
        if switch is None:
            switch = EagerScope._SWITCH = _eager_context.ContextSwitch(
                False, _eager_context.eager_mode, None
            )
        self._switches.stack.append(switch)

    def __exit__(self, *exc: object) -> None:
        self._local.is_eager = self._saved.pop()
        self._switches.stack.pop()


def graph_default(graph: tf.Graph) -> GraphScope:
    """``with graph_default(g):`` does what ``with g.as_default():`` does, about three times
    cheaper (``Graph.as_default`` nests three generator context managers)."""
    return GraphScope(graph)


#: ``with eager():`` turns eager execution on, even while a v1 graph is the default graph
#: (``tf.init_scope`` lifts out of function graphs, not out of a v1 graph): TF's own
#: ``context.eager_mode()`` without its generator.
eager = EagerScope


#: ``new_session_run_values((results, options, run_metadata))`` builds a
#: ``tf.compat.v1.train.SessionRunValues`` (a namedtuple) with ``tuple.__new__`` in C, as its
#: generated ``__new__`` builds it, without that Python frame per hook per step; the one-time
#: deprecation log line TF 2.15's estimator wraps around that ``__new__`` is not printed.
#: ``tests/test_tfcompat.py`` fails if TensorFlow gives the class a constructor of its own.
new_session_run_values = functools.partial(tuple.__new__, tf.compat.v1.train.SessionRunValues)


def default_session(session: Any) -> Any:
    """``with default_session(s):`` makes ``s`` the default session, as ``Session.as_default()``
    does for a session (``Tensor.eval()`` and ``Operation.run()`` then use it): for the bridge's
    session proxy, which has no session machinery of its own."""
    return _stack.default_session(session)


def _variable_scope_module() -> Any:
    from tensorflow.python.ops import variable_scope

    return variable_scope


@functools.lru_cache(maxsize=1)
def _model_fn_symbols_checked() -> bool:
    vs = _variable_scope_module()
    for attribute in ("_VARSTORE_KEY", "_VariableStore", "with_variable_store"):
        if not hasattr(vs, attribute):
            raise ImportError(
                f"TF {tf.__version__} moved tensorflow.python.ops.variable_scope.{attribute}: "
                "update hookbridge._tfcompat.fresh_tf1_graph_state"
            )
    return True


class fresh_tf1_graph_state:
    """``with fresh_tf1_graph_state(graph):`` gives ``graph`` (a ``tf.function``'s FuncGraph) a
    variable store and collections of its own for the time of one ``model_fn`` call, as the
    fresh ``tf.Graph`` of each Estimator call had: a FuncGraph shares the variable store
    (``variable_scope._VARSTORE_KEY``, copied from the outer graph) and the global/trainable
    variable collections (by reference) with the eager graph, so TF1 code in two traces (or in
    two models) would otherwise see each other's variables. Private: ``Graph._collections``,
    ``variable_scope._VariableStore`` / ``with_variable_store``."""

    def __init__(self, graph: tf.Graph) -> None:
        _model_fn_symbols_checked()
        self._graph = graph
        self._saved: Any = None
        self._store_scope: Any = None

    def __enter__(self) -> tf.Graph:
        vs = _variable_scope_module()
        self._saved = self._graph._collections
        self._graph._collections = {}
        self._store_scope = vs.with_variable_store(vs._VariableStore())
        self._store_scope.__enter__()
        return self._graph

    def __exit__(self, *exc: Any) -> None:
        try:
            self._store_scope.__exit__(*exc)
        finally:
            self._graph._collections = self._saved


def tf1_name_scope() -> str:
    """The name scope (``""`` or ``"a/b/"``) a variable made here takes in a TF1 graph.

    Under ``init_scope`` (an optimizer's ``beta1_power``; every ``ResourceVariable``) TF names a
    variable by the name scope of the graph it was asked for in, then makes it in the outermost
    graph. TF1 and TF2 agree on that scope except inside control flow: a ``tf.cond`` /
    ``tf.while_loop`` branch graph starts at the root scope in a TF1 graph, while one made under
    eager execution (a ``tf.function``) starts at the scope its op was made in (private
    ``ControlFlowFuncGraph.is_control_flow_graph`` and ``outer_graph``; the branch graph is still
    the default graph under ``init_scope``). That inherited start, which is the outer graph's
    current scope while the branch is built, is dropped here.
    """
    scope = tf.get_current_name_scope()
    graph = tf.compat.v1.get_default_graph()
    if getattr(graph, "is_control_flow_graph", False) and (
        tf.compat.v1.executing_eagerly_outside_functions()
    ):
        outer = graph.outer_graph
        if outer is None:
            raise AttributeError(
                "control-flow FuncGraph has no outer_graph: update "
                "hookbridge._tfcompat.tf1_name_scope"
            )
        start = outer.get_name_scope()
        if start and (scope == start or scope.startswith(start + "/")):
            scope = scope[len(start) :].lstrip("/")
    return scope + "/" if scope else ""


def _tensor_class() -> Any:
    try:
        from tensorflow.python.framework import tensor as tensor_module  # TF >= 2.14

        return tensor_module.Tensor
    except ImportError:  # pragma: no cover - older TF
        return _ops.Tensor


class tf1_graph_equality:
    """``with tf1_graph_equality():`` gives tensors and variables made or used inside the TF1
    graph semantics of equality the Estimator's ``tf.Graph`` had: hashable, ``==`` is identity.

    In a ``tf.function`` graph TF 2 makes them unhashable (``Variable is unhashable``) and
    ``==`` elementwise, so TF1 code run there (tensorflow-estimator's own ``EstimatorSpec``
    builds ``set(LOCAL_VARIABLES)``) fails where it ran in the Estimator's graph. Private:
    ``Tensor._USE_EQUALITY``, the flag ``tf.compat.v1.disable_v2_tensorequality`` sets, set for
    the time of the block only (a ``model_fn`` call, traced on one thread)."""

    def __enter__(self) -> None:
        tensor = _tensor_class()
        if not hasattr(tensor, "_USE_EQUALITY"):
            raise AttributeError(
                f"TF {tf.__version__} moved Tensor._USE_EQUALITY: update "
                "hookbridge._tfcompat.tf1_graph_equality"
            )
        self._saved = tensor._USE_EQUALITY
        tensor._USE_EQUALITY = False

    def __exit__(self, *exc: Any) -> None:
        _tensor_class()._USE_EQUALITY = self._saved


def captured_handles(graph: Any, variables: Any) -> set[int]:
    """The ids of the tensors through which a ``tf.function`` graph reads ``variables`` (the
    placeholders its ops take for their captured handles). Private: ``FuncGraph.captures``."""
    captures = getattr(graph, "captures", None)
    if captures is None:
        raise AttributeError(
            f"TF {tf.__version__}: FuncGraph has no captures: update "
            "hookbridge._tfcompat.captured_handles"
        )
    handles = {id(v.handle) for v in variables}
    return {id(internal) for external, internal in captures if id(external) in handles}


def update_op_input(op: Any, index: int, tensor: Any) -> None:
    """Makes ``tensor`` (same graph and dtype) input ``index`` of the traced ``op``: the private
    ``Operation._update_input`` (TensorFlow's ``UpdateEdge``)."""
    update = getattr(op, "_update_input", None)
    if update is None:
        raise AttributeError(
            f"TF {tf.__version__}: Operation has no _update_input: update "
            "hookbridge._tfcompat.update_op_input"
        )
    update(index, tensor)
