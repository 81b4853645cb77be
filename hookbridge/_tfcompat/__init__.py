"""Every private TensorFlow / Keras API hookbridge touches, isolated in this one package.

``tests/test_tfcompat.py`` imports each of these and fails loudly (naming the symbol) when a
TensorFlow or Keras release moves it. Nothing else in hookbridge imports a private TF/Keras path
(``tests/test_tfcompat.py::test_no_private_tf_imports_outside_tfcompat``). One submodule per
concern; every name is re-exported here, so callers write ``_tfcompat.name``:

* :mod:`.graph`: TensorFlow's graph, session and eager-context internals.
* :mod:`.hooks`: TF1 built-in hook and ``Saver`` internals.
* :mod:`.callbacks`: Keras callback internals.
* :mod:`.optimizers`: Optimizer internals.
* :mod:`.models`: Keras model, layer and variable internals.
* :mod:`.estimator`: tensorflow-estimator internals.
* :mod:`.upgrader`: TensorFlow's own TF1 -> TF2 upgrader (``tf_upgrade_v2``).
* :mod:`.feature_columns`: TensorFlow's feature-column internals, as canned Estimators run them.
* :mod:`.functions`: ``tf.function`` internals (a concrete function called flat) and the
  ``tf.function`` inside Keras 3's ``train_function``.

A new private-API use goes into the submodule of its concern (with its test at the end of
``tests/test_tfcompat.py``) and its name into the imports below.
"""

from __future__ import annotations

from hookbridge._tfcompat.callbacks import (  # noqa: F401
    EAGER_FREE_CALLBACKS,
    KERAS_OPTIMIZER_SCHEDULE_ATTRIBUTE,
    KERAS_TEST_COUNTER_ATTRIBUTE,
    KERAS_TRAIN_COUNTER_ATTRIBUTE,
    PRIVATE_SYMBOLS_CALLBACK_HOOK,
    compile_metrics_by_key,
    copy_keras_default_marker,
    implements_batch_hooks,
    implements_train_batch_hooks,
    keras2_builtin_callback_names,
    keras3_metrics_list,
    keras_fit_start,
    keras_is_default,
    metric_direction,
)
from hookbridge._tfcompat.estimator import (  # noqa: F401
    _HEAD_ATTRIBUTES,
    canned_estimator_arguments,
    canned_head_settings,
    default_export_outputs,
    export_output_classes,
)
from hookbridge._tfcompat.feature_columns import (  # noqa: F401
    feature_column_internals,
)
from hookbridge._tfcompat.functions import (  # noqa: F401
    KERAS3_ITERATOR_FUNCTION,
    concrete_call_flat,
    concrete_flat_inputs,
    keras3_iterator_function,
)
from hookbridge._tfcompat.graph import (  # noqa: F401
    PRIVATE_SYMBOLS,
    UNBOUND_SUMMARY_OP_SUFFIX,
    EagerScope,
    GraphScope,
    _ContextObjects,
    _eager_context,
    _model_fn_symbols_checked,
    _ops,
    _stack,
    _tensor_class,
    _tf_session,
    _training_util,
    _variable_scope_module,
    captured_handles,
    default_session,
    eager,
    fetch_mapper,
    fresh_tf1_graph_state,
    global_step_read_tensor,
    graph_default,
    new_session_run_values,
    tf1_graph_equality,
    tf1_name_scope,
    unbound_summary_ops,
    update_op_input,
)
from hookbridge._tfcompat.hooks import (  # noqa: F401
    checkpoint_saver_hook_saver,
    checkpoint_saver_listeners,
    forget_checkpoint_saver_hook_saver,
    hook_output_dir,
    hook_summary_writer,
    logging_hook_formatter,
    nan_tensor_hook_settings,
    profiler_hook_output_file,
    saver_var_list,
    stop_at_step_last_step,
)
from hookbridge._tfcompat.models import (  # noqa: F401
    keras3_tf_variable,
    keras3_track_loss,
    keras3_track_weight,
    keras_concatenated,
    keras_steps_per_execution,
    keras_tensor_inputs,
    keras_tensor_layer,
    keras_weight_variable,
)
from hookbridge._tfcompat.optimizers import (  # noqa: F401
    _KERAS_SLOT_LISTS_BY_CLASS,
    _TF1_OPTIMIZER_ALIASES,
    KERAS_SLOT_LISTS,
    build_keras_optimizer,
    keras2_optimizer_set_learning_rate,
    keras_gradient_accumulators,
    keras_optimizer_config,
    keras_optimizer_counter,
    keras_optimizer_owns,
    keras_optimizer_slot,
    keras_optimizer_slot_variable,
    keras_optimizer_variable_index,
    mark_keras_optimizer_built,
    tf1_optimizer_settings,
)
from hookbridge._tfcompat.upgrader import (  # noqa: F401
    tf_upgrader,
)
