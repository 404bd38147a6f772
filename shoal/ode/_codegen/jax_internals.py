"""The two private JAX hooks the translator needs; JAX (0.10) has no public equivalent."""

from __future__ import annotations


def eager():
    """A context where binding primitives on concrete arrays computes values now.

    The code generator folds constants and moves element ids with JAX itself, and it may run while
    an outer jit/vmap is tracing the user's program; those traces must not capture these binds.
    ``jax.ensure_compile_time_eval`` does not escape an enclosing vmap, the eval trace does.
    """
    from jax._src import core as _core

    return _core.eval_context()


def source_location(eqn) -> str:
    """The user's file:line of an equation, or "" when JAX recorded none."""
    try:
        from jax._src import source_info_util

        return source_info_util.summarize(eqn.source_info)
    except Exception:  # noqa: BLE001 - source info is best effort
        return ""
