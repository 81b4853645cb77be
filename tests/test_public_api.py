"""The exported names are the contract."""

import hookbridge


def test_exported_names():
    assert {"HookCallback", "restore_checkpoint"} <= set(hookbridge.__all__)
    assert {"propose_assignment", "estimator_hooks"} <= set(hookbridge.__all__)
    for name in hookbridge.__all__:
        assert getattr(hookbridge, name) is not None, name


def test_package_is_typed():
    import pathlib

    assert (pathlib.Path(hookbridge.__file__).parent / "py.typed").exists()
