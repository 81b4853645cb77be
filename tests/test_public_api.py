"""The exported names are the contract."""

import hookbridge

#: The public names, exactly: adding or removing one is a decision, made here and in docs/api.md.
EXPORTED = [
    "CallbackHook",
    "CallbackLoop",
    "HookCallback",
    "UnsupportedModelAttributeError",
    "estimator_hooks",
    "hooks",
    "keras_twin",
    "load_weights",
    "model_fn_model",
    "propose_assignment",
    "read_weights",
    "restore_checkpoint",
]


def test_exported_names_are_exactly_the_contract():
    assert hookbridge.__all__ == EXPORTED  # the exact list, in order, no more, no fewer
    assert sorted(dir(hookbridge)) == sorted({*EXPORTED, *dir(hookbridge)})  # dir lists them
    for name in hookbridge.__all__:
        assert getattr(hookbridge, name) is not None, name
    assert getattr(hookbridge, "__version__", None)


def test_star_import_gives_exactly_the_exported_names():
    namespace: dict = {}
    exec("from hookbridge import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == sorted(EXPORTED)


def test_package_is_typed():
    import pathlib

    assert (pathlib.Path(hookbridge.__file__).parent / "py.typed").exists()


def test_api_page_lists_every_exported_callable_with_every_parameter():
    """docs/api.md's table is the one place a user reads the signatures at a glance: it must
    not fall behind the code (it once lacked three HookCallback arguments)."""
    import inspect
    import pathlib

    page = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()
    rows = {
        line.split("`")[1].split("(")[0]: line.split("|")[1]
        for line in page.splitlines()
        if line.startswith("| `")
    }
    for name in hookbridge.__all__:
        obj = getattr(hookbridge, name)
        if not callable(obj) or (isinstance(obj, type) and issubclass(obj, Exception)):
            continue
        assert name in rows, f"docs/api.md has no row for hookbridge.{name}"
        for parameter in inspect.signature(obj).parameters:
            assert parameter in rows[name], f"docs/api.md: {name} lacks {parameter}"
