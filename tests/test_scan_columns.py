"""``hookbridge scan``: a canned Estimator's feature columns, read from the syntax tree (issue 33
item 5).

``tests/fixtures/wide_deep_project`` is laid out like tensorflow/models official/r1/wide_deep:
the columns are built in ``census_dataset.build_model_columns()``, which reaches
``census_main.build_estimator`` as a parameter through ``wide_deep_run_loop.run_loop`` (shared
with the movielens job, which passes another column function). Every row lists each column's
type, its key and whether keras_twin builds it (:mod:`hookbridge._migrate.twins.kinds`), or
says why the tree cannot tell. The scan never imports TensorFlow; only the last test does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hookbridge._migrate.scan import scan
from hookbridge._migrate.scan.report import render
from hookbridge._migrate.twins import kinds

ROOT = Path(__file__).resolve().parents[1]
#: The scan never imports TensorFlow; the oracle tests (TensorFlow's own columns) are per_tensorflow.
pytestmark = pytest.mark.one_stack("the scan reads source text and never imports TensorFlow")
WIDE_DEEP = ROOT / "tests" / "fixtures" / "wide_deep_project"
CENSUS_MAIN = "official/r1/wide_deep/census_main.py"

WIDE = [
    ("categorical_column_with_vocabulary_list", "education"),
    ("categorical_column_with_vocabulary_list", "marital_status"),
    ("categorical_column_with_vocabulary_list", "relationship"),
    ("categorical_column_with_vocabulary_list", "workclass"),
    ("categorical_column_with_hash_bucket", "occupation"),
    ("bucketized_column", "age"),
    ("crossed_column", "education x occupation"),
    ("crossed_column", "age x education x occupation"),
]
DEEP = [
    ("numeric_column", "age"),
    ("numeric_column", "education_num"),
    ("numeric_column", "capital_gain"),
    ("numeric_column", "capital_loss"),
    ("numeric_column", "hours_per_week"),
    ("indicator_column", "workclass"),
    ("indicator_column", "education"),
    ("indicator_column", "marital_status"),
    ("indicator_column", "relationship"),
    ("embedding_column", "occupation"),
]


@pytest.fixture(scope="module")
def wide_deep():
    return scan(WIDE_DEEP)


def _canned(result, path: str | None = None):
    return {
        (x.path, x.line): x
        for x in result.findings
        if x.kind == "entry-point" and x.columns and (path is None or x.path == path)
    }


def _shape(row):
    return [(c.argument, c.type, c.key, c.builds) for c in row.columns]


def _job(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "job" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path / "job"


def _row(result, path: str, name_part: str = "estimator."):
    rows = [
        x
        for x in result.findings
        if x.kind == "entry-point" and x.path == path and name_part in x.name
    ]
    assert len(rows) == 1, [(x.line, x.name) for x in rows]
    return rows[0]


# ------------------------------------------------------- the census job, across three modules
def test_census_columns_are_followed_from_the_function_another_module_passes(wide_deep):
    rows = _canned(wide_deep, CENSUS_MAIN)
    wide, deep, combined = (rows[k] for k in sorted(rows))
    assert _shape(wide) == [("feature_columns", t, k, True) for t, k in WIDE]
    assert _shape(deep) == [("feature_columns", t, k, True) for t, k in DEEP]
    assert _shape(combined) == [("linear_feature_columns", t, k, True) for t, k in WIDE] + [
        ("dnn_feature_columns", t, k, True) for t, k in DEEP
    ]
    # where each column is made: the helper's call for the vocabulary lists, the list for +=
    assert combined.columns[0].where == "official/r1/wide_deep/census_dataset.py:10"
    assert combined.columns[4].where == "official/r1/wide_deep/census_dataset.py:25"
    assert "keras_twin builds its Keras model (18 feature columns" in combined.detail
    assert (
        "V2 (DNNLinearCombinedClassifierV2: tf.estimator on TF 2; the V1 class on TF 1.x)"
        in combined.detail
    )
    assert "keras_twin('DNNLinearCombinedClassifierV2', <its constructor arguments>)" in (
        combined.detail
    )


def test_each_caller_of_the_shared_run_loop_gives_its_own_columns(wide_deep):
    # run_loop has two callers (census, movielens) passing two column functions: each
    # build_estimator is called through the run_loop call that passes it, so its columns are
    # that call's, not "unknown: callers differ" and never the other job's.
    (movie,) = _canned(wide_deep, "official/r1/wide_deep/movielens_main.py").values()
    assert _shape(movie) == [
        ("feature_columns", "numeric_column", "genres", True),
        ("feature_columns", "embedding_column", "user_id", True),
        ("feature_columns", "embedding_column", "item_id", True),
    ]
    assert "V1 (DNNRegressor of tf.compat.v1.estimator)" in movie.detail  # the spelling tells
    assert "keras_twin('DNNRegressor'," in movie.detail


def test_a_scan_of_the_package_alone_resolves_its_longer_imports(wide_deep):
    # `from official.r1.wide_deep import census_dataset` in a scan of wide_deep/ (modules named
    # census_dataset, ...): found by the end of the dotted path.
    alone = scan(WIDE_DEEP / "official" / "r1" / "wide_deep")
    before = {line: _shape(x) for (_, line), x in _canned(wide_deep, CENSUS_MAIN).items()}
    after = {line: _shape(x) for (_, line), x in _canned(alone, "census_main.py").items()}
    assert after == before and len(after) == 3


def test_the_json_and_text_reports_carry_the_columns(wide_deep):
    data = json.loads(render(wide_deep, "json"))
    rows = [d for d in data["findings"] if d["path"] == CENSUS_MAIN and d["columns"]]
    combined = rows[-1]["columns"]
    assert combined[6] == {
        "argument": "linear_feature_columns",
        "type": "crossed_column",
        "key": "education x occupation",
        "builds": True,
        "reason": "",
        "where": "official/r1/wide_deep/census_dataset.py:32",
    }
    assert all(d["columns"] == [] for d in data["findings"] if d["kind"] != "entry-point")
    table = render(wide_deep, "table")
    assert "dnn_feature_columns: numeric_column (age, education_num, capital_gain," in table


def test_the_scan_imports_no_tensorflow():
    code = (
        "import sys\n"
        "from hookbridge._migrate.scan import scan\n"
        f"rows = [x for x in scan({str(WIDE_DEEP)!r}).findings if x.columns]\n"
        "assert len(rows) == 4, rows\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('tensorflow', 'keras', 'tf_keras')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------- refused: every one, with its reason
def test_every_column_keras_twin_does_not_build_is_named_at_once(tmp_path):
    job = _job(
        tmp_path,
        {
            "cols.py": """
            import tensorflow as tf
            import tensorflow.compat.v1 as v1
            fc = tf.feature_column

            def make():
                clicks = fc.sequence_numeric_column("clicks")
                words = fc.sequence_categorical_column_with_identity("words", 100)
                city = fc.categorical_column_with_hash_bucket("city", 50)
                shop = fc.categorical_column_with_identity("shop", 20)
                old = v1.feature_column.shared_embedding_columns([city, shop], 4)
                return [clicks, fc.embedding_column(words, 4), fc.numeric_column("n")] + old
            """,
            "train.py": """
            import tensorflow.compat.v1 as tf
            from cols import make

            est = tf.estimator.DNNClassifier([8], make())
            legacy = tf.estimator.LinearRegressor([tf.contrib.layers.real_valued_column("x")])
            """,
        },
    )
    result = scan(job)
    row = _row(result, "train.py", "DNNClassifier")
    assert _shape(row) == [
        ("feature_columns", "sequence_numeric_column", "clicks", False),
        ("feature_columns", "embedding_column", "words", False),
        ("feature_columns", "numeric_column", "n", True),
        ("feature_columns", "shared_embedding_columns", "city", True),
        ("feature_columns", "shared_embedding_columns", "shop", True),
    ]
    reasons = [c.reason for c in row.columns]
    assert reasons[0] == kinds.refusal("sequence_numeric_column")
    assert reasons[1].startswith("over sequence_categorical_column_with_identity (words)")
    assert row.detail.count(" at cols.py:") == 2  # each refused column, where it is made
    assert "keras_twin refuses 2 feature columns" in row.detail
    assert "V1 (DNNClassifier of tf.compat.v1.estimator)" in row.detail
    assert "builds its Keras model" not in row.detail
    contrib = _row(result, "train.py", "LinearRegressor")
    assert _shape(contrib) == [("feature_columns", "real_valued_column", "x", False)]
    assert contrib.columns[0].reason == kinds.CONTRIB_REASON


def test_an_embedding_loaded_from_another_checkpoint_is_refused(tmp_path):
    job = _job(
        tmp_path,
        {
            "train.py": """
            import tensorflow as tf
            fc = tf.feature_column
            city = fc.categorical_column_with_hash_bucket("city", 10)
            warm = fc.embedding_column(city, 4, ckpt_to_load_from="old/", tensor_name_in_ckpt="e")
            cold = fc.embedding_column(city, 4, ckpt_to_load_from=None)
            est = tf.estimator.DNNClassifier([4], [warm, cold])
            """
        },
    )
    row = _row(scan(job), "train.py")
    assert [(c.builds, c.reason) for c in row.columns] == [
        (False, kinds.CHECKPOINT_REASON),
        (True, ""),
    ]


def test_shared_embeddings_and_the_supported_set(tmp_path):
    job = _job(
        tmp_path,
        {
            "train.py": """
            import tensorflow as tf
            fc = tf.feature_column

            user = fc.categorical_column_with_vocabulary_file("user", "users.txt")
            item = fc.categorical_column_with_vocabulary_file("item", "items.txt")
            rated = fc.weighted_categorical_column(
                fc.categorical_column_with_identity("shop", 9), "rating"
            )
            user_emb, item_emb = fc.shared_embeddings([user, item], 8)
            price = fc.numeric_column("price", shape=(2,), normalizer_fn=lambda x: x / 10)
            est = tf.estimator.DNNLinearCombinedRegressor(
                linear_feature_columns=[rated, fc.bucketized_column(price, [1.0, 5.0])],
                dnn_feature_columns=[user_emb, item_emb, fc.indicator_column(user), price],
            )
            """
        },
    )
    row = _row(scan(job), "train.py")
    assert [(c.type, c.key, c.builds) for c in row.columns] == [
        ("weighted_categorical_column", "shop", True),
        ("bucketized_column", "price", True),
        ("shared_embeddings", "user", True),
        ("shared_embeddings", "item", True),
        ("indicator_column", "user", True),
        ("numeric_column", "price", True),
    ]
    assert {c.type for c in row.columns} | {
        "categorical_column_with_vocabulary_file",
        "categorical_column_with_identity",
        "categorical_column_with_vocabulary_list",
        "categorical_column_with_hash_bucket",
        "crossed_column",
        "embedding_column",
        "shared_embedding_columns",  # the V1 spelling (tests/test_twin_shared.py)
    } == kinds.SUPPORTED_FUNCTIONS


# ------------------------------------------------------- unknown: never a guess
def test_what_the_tree_cannot_tell_is_unknown_with_the_reason(tmp_path):
    job = _job(
        tmp_path,
        {
            "train.py": """
            import tensorflow as tf
            from somewhere_else import columns_from_config

            fc = tf.feature_column

            def orphan(columns):
                return tf.estimator.LinearClassifier(columns)

            def two_callers(columns):
                return tf.estimator.DNNClassifier([4], columns)

            def two_returns(flag):
                if flag:
                    return [fc.numeric_column("a")]
                return [fc.sequence_numeric_column("b")]

            two_callers([fc.numeric_column("x")])
            two_callers([fc.categorical_column_with_identity("y", 3)])
            other = tf.estimator.LinearRegressor(two_returns(True))
            outside = tf.estimator.DNNRegressor([4], columns_from_config())
            """
        },
    )
    result = scan(job)
    rows = {x.name: x for x in result.findings if x.kind == "entry-point"}
    expected = {
        "tf.estimator.LinearClassifier": "columns is a parameter of orphan, and no call of "
        "orphan in the scanned tree gives it",
        "tf.estimator.DNNClassifier": "the calls of two_callers at train.py:18, train.py:19 "
        "give different columns",
        "tf.estimator.LinearRegressor": "the return statements of two_returns (lines 15, 16) "
        "give different columns",
        "tf.estimator.DNNRegressor": "columns_from_config comes from "
        "somewhere_else.columns_from_config, outside the scanned tree",
    }
    for name, reason in expected.items():
        row = rows[name]
        assert [c.builds for c in row.columns] == [None], (name, row.columns)
        assert reason in row.columns[0].reason, (name, row.columns[0].reason)
        assert "1 feature column unknown" in row.detail and "builds its Keras model" not in (
            row.detail
        )


def test_columns_in_a_dict_of_keyword_arguments(tmp_path):
    # census's `DNNLinearCombinedClassifier(config=config, **columns.estimator_arguments())`:
    # a dict literal is read; any other **kwargs or *args may hold the columns: unknown.
    job = _job(
        tmp_path,
        {
            "cols.py": """
            import tensorflow as tf

            def estimator_arguments():
                deep = [tf.feature_column.numeric_column("age")]
                return {"dnn_feature_columns": deep, "dnn_hidden_units": [4]}
            """,
            "train.py": """
            import tensorflow as tf
            import cols

            def build(config, **options):
                read = tf.estimator.DNNLinearCombinedRegressor(
                    config=config, **cols.estimator_arguments()
                )
                opaque = tf.estimator.DNNRegressor(hidden_units=[4], **options)
                positional = tf.estimator.LinearRegressor(*options["args"])
                return read, opaque, positional
            """,
        },
    )
    result = scan(job)
    read = _row(result, "train.py", "DNNLinearCombined")
    assert _shape(read) == [("dnn_feature_columns", "numeric_column", "age", True)]
    opaque = _row(result, "train.py", "DNNRegressor")
    assert [(c.key, c.builds) for c in opaque.columns] == [("**options", None)]
    assert "builds its Keras model" not in opaque.detail  # never "0 columns, all built"
    positional = _row(result, "train.py", "LinearRegressor")
    assert [(c.key, c.builds) for c in positional.columns] == [("*options['args']", None)]


def test_lists_built_in_steps(tmp_path):
    job = _job(
        tmp_path,
        {
            "train.py": """
            import tensorflow as tf
            fc = tf.feature_column
            NUMERIC = ["age", "hours"]

            def columns():
                out = [fc.numeric_column(k) for k in NUMERIC]
                out = out + [fc.categorical_column_with_hash_bucket("city", 10)]
                out += [fc.numeric_column("late")]
                out.append(fc.indicator_column(fc.categorical_column_with_identity("d", 7)))
                out.extend(list((fc.numeric_column("e"),)))
                return out

            wide, deep = [], columns()
            est = tf.estimator.DNNLinearCombinedClassifier(
                linear_feature_columns=wide, dnn_feature_columns=deep
            )
            per_item = tf.estimator.DNNClassifier(
                [4], [fc.numeric_column(k) for k in read_keys()]
            )
            """
        },
    )
    result = scan(job)
    row = _row(result, "train.py", "DNNLinearCombined")
    assert [(c.type, c.key) for c in row.columns] == [
        ("numeric_column", "age"),
        ("numeric_column", "hours"),
        ("categorical_column_with_hash_bucket", "city"),
        ("numeric_column", "late"),
        ("indicator_column", "d"),
        ("numeric_column", "e"),
    ]
    # a categorical column given to the DNN part: its input layer takes dense columns only
    assert [c.builds for c in row.columns] == [True, True, False, True, True, True]
    assert row.columns[2].reason == kinds.DNN_INPUT_REASON
    per_item = _row(result, "train.py", "DNNClassifier")
    assert _shape(per_item) == [
        ("feature_columns", "numeric_column", "one per k in read_keys()", True)
    ]


def test_what_runs_under_an_if_or_a_loop(tmp_path):
    job = _job(
        tmp_path,
        {
            "train.py": """
            import tensorflow as tf
            fc = tf.feature_column
            KEYS = ["a", "b", "c"]

            def looped(flag):
                cols = []
                for k in KEYS:
                    cols.append(fc.numeric_column(k))
                if flag:
                    cols.append(fc.sequence_numeric_column("s"))
                return tf.estimator.DNNClassifier([4], cols)

            def branches(kind):
                if kind == "wide":
                    cols = [fc.numeric_column("x")]
                else:
                    cols = [fc.categorical_column_with_identity("y", 4)]
                return tf.estimator.LinearClassifier(cols)

            def same_on_both_paths(kind):
                cols = [fc.numeric_column("x")]
                if kind:
                    cols = [fc.numeric_column("x")]
                return tf.estimator.LinearRegressor(cols)

            def keys_at_run_time(keys):
                cols = []
                for k in keys:
                    cols.append(fc.numeric_column(k))
                return tf.estimator.DNNRegressor([2], cols)
            """
        },
    )
    result = scan(job)
    looped = _row(result, "train.py", "DNNClassifier")
    assert [(c.key, c.builds, c.where) for c in looped.columns] == [
        ("a", True, "train.py:9"),
        ("b", True, "train.py:9"),
        ("c", True, "train.py:9"),
        ("s", False, "train.py:11 (only under the if at line 10)"),
    ]
    branches = _row(result, "train.py", "LinearClassifier")
    assert [c.builds for c in branches.columns] == [None]
    assert branches.columns[0].reason.startswith(
        "the two paths of cols, changed under the if at line 15, give different columns"
    )
    same = _row(result, "train.py", "LinearRegressor")
    assert _shape(same) == [("feature_columns", "numeric_column", "x", True)]
    per_item = _row(result, "train.py", "DNNRegressor")
    assert _shape(per_item) == [("feature_columns", "numeric_column", "one per k in keys", True)]


# ------------------------------------------------------- the one list, against TensorFlow
@pytest.mark.per_tensorflow("the oracle is the installed TensorFlow's columns")
def test_the_supported_list_names_what_tensorflow_builds():
    tf = pytest.importorskip("tensorflow")
    from tensorflow.python.feature_column import feature_column_v2 as fc_v2

    fc = tf.feature_column
    graph = tf.Graph()  # shared embeddings (V1 and V2) refuse eager execution
    with graph.as_default():
        city = fc.categorical_column_with_hash_bucket("city", 10)
        shop = fc.categorical_column_with_identity("shop", 10)
        shop2 = fc.categorical_column_with_identity("shop2", 10)
        age = fc.numeric_column("age")
        made = {
            "numeric_column": age,
            "bucketized_column": fc.bucketized_column(age, [1.0]),
            "categorical_column_with_vocabulary_list": fc.categorical_column_with_vocabulary_list(
                "w", ["a"]
            ),
            "categorical_column_with_vocabulary_file": fc.categorical_column_with_vocabulary_file(
                "w", "vocabulary.txt", vocabulary_size=1
            ),
            "categorical_column_with_hash_bucket": city,
            "categorical_column_with_identity": shop,
            "crossed_column": fc.crossed_column([shop, "x"], 10),
            "embedding_column": fc.embedding_column(city, 2),
            "indicator_column": fc.indicator_column(city),
            "weighted_categorical_column": fc.weighted_categorical_column(shop, "weight"),
            "shared_embeddings": fc.shared_embeddings([shop, shop2], 2)[0],
            "shared_embedding_columns": tf.compat.v1.feature_column.shared_embedding_columns(
                [shop, shop2], 2
            )[0],
        }
    assert set(made) == kinds.SUPPORTED_FUNCTIONS
    from tensorflow.python.feature_column import feature_column as fc_v1

    for kind in kinds.SUPPORTED_COLUMNS:
        module = fc_v1 if kind.function == "shared_embedding_columns" else fc_v2
        assert type(made[kind.function]) is getattr(module, kind.cls), kind
        # what a DNN's input layer takes: TensorFlow's dense columns, and only those
        dense = isinstance(made[kind.function], (fc_v2.DenseColumn, fc_v1._DenseColumn))
        assert dense == (kind.function in kinds.DENSE_FUNCTIONS), kind
    with (
        graph.as_default(),
        pytest.raises(ValueError, match="feature_columns must be a _DenseColumn"),
    ):
        tf.compat.v1.feature_column.input_layer({"city": tf.constant([["a"]])}, [city])
    assert kinds.refusal("shared_embedding_columns") == ""  # built (tests/test_twin_shared.py)


def _native(column) -> tuple[str, str]:
    """(the tf.feature_column function, its key as the scan writes it) of a real column."""
    function = {kind.cls: kind.function for kind in kinds.SUPPORTED_COLUMNS}[type(column).__name__]
    return function, _native_key(column)


def _native_key(column) -> str:
    for source in ("source_column", "categorical_column"):
        if hasattr(column, source):
            return _native_key(getattr(column, source))
    if hasattr(column, "keys"):  # crossed
        return " x ".join(k if isinstance(k, str) else _native_key(k) for k in column.keys)
    return column.key


@pytest.mark.per_tensorflow("the oracle is the installed TensorFlow's columns")
@pytest.mark.parametrize(
    ("root", "module", "function", "path"),
    [
        # this file's fixture, laid out like tensorflow/models
        (WIDE_DEEP, "official.r1.wide_deep.census_dataset", "build_model_columns", CENSUS_MAIN),
        # the census twin's own columns (tests/fixtures/census_twin: dict comprehensions, keys
        # looked up, *numeric.values(), the Estimator's arguments in a **dict)
        (ROOT / "tests", "fixtures.census_twin.columns", "wide_and_deep", "native.py"),
    ],
)
def test_the_scanned_columns_are_tensorflows(monkeypatch, root, module, function, path):
    """The oracle: the columns TensorFlow builds from the same source, in the same order."""
    pytest.importorskip("tensorflow")
    import importlib

    monkeypatch.syspath_prepend(str(root))
    before = set(sys.modules)
    try:
        wide, deep = getattr(importlib.import_module(module), function)()
    finally:  # no fixture module stays imported
        for name in set(sys.modules) - before:
            del sys.modules[name]
    native = [("linear_feature_columns", *_native(c)) for c in wide]
    native += [("dnn_feature_columns", *_native(c)) for c in deep]
    scanned_root = root if path == CENSUS_MAIN else root / "fixtures" / "census_twin"
    rows = [x for x in scan(scanned_root).findings if x.path == path and x.columns]
    combined = [x for x in rows if "DNNLinearCombined" in x.name]
    assert len(combined) == 1
    assert [(c.argument, c.type, c.key) for c in combined[0].columns] == native
    assert all(c.builds for c in combined[0].columns) and len(native) == 18


@pytest.mark.parametrize(
    "imports, call",
    [
        ("import census_columns", "census_columns.build_model_columns()"),
        ("from census_columns import build_model_columns", "build_model_columns()"),
    ],
)
def test_a_name_the_scanned_module_lacks_is_said_so(tmp_path, imports, call):
    job = _job(
        tmp_path,
        {
            "census_columns.py": """
            import tensorflow as tf

            def wide_and_deep():
                return [tf.feature_column.numeric_column("a")], [tf.feature_column.numeric_column("b")]
            """,
            "train.py": f"""
            import tensorflow as tf
            {imports}

            wide, deep = {call}
            est = tf.compat.v1.estimator.DNNLinearCombinedClassifier(
                linear_feature_columns=wide, dnn_feature_columns=deep, dnn_hidden_units=[4]
            )
            """,
        },
    )
    row = _row(scan(job), "train.py", "DNNLinearCombined")
    reasons = [c.reason for c in row.columns]
    assert reasons and all(
        "census_columns (census_columns.py) is scanned but has no name build_model_columns; "
        "its functions using columns: wide_and_deep"
        in r
        and "outside" not in r
        for r in reasons
    ), reasons
