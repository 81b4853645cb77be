"""Merging of the hooks' ``SessionRunArgs``: fetches, feeds and options, with TF1's own errors."""

from __future__ import annotations

from typing import Any


def raise_if_feeds_intersect(feeds1: dict, feeds2: dict, message: str) -> None:
    """Raises the ``RuntimeError`` native ``MonitoredSession`` raises on a feed conflict."""
    intersection = set(feeds1.keys()) & set(feeds2.keys())
    if intersection:
        raise RuntimeError(message + " Conflict(s): " + str(list(intersection)))


def merge_feeds(hook_feeds: dict, incoming: dict) -> None:
    """Adds one hook's feeds to ``hook_feeds`` (in place), as native ``_HookedSession`` does."""
    raise_if_feeds_intersect(hook_feeds, incoming, "Same tensor is fed by two hooks.")
    hook_feeds.update(incoming)


def merge_user_feeds(hook_feeds: dict, user_feeds: dict | None) -> dict:
    """Combines hooks' feeds with the caller's feeds, with the native conflict error."""
    if not user_feeds:
        return hook_feeds
    if not hook_feeds:
        return dict(user_feeds)
    raise_if_feeds_intersect(
        user_feeds, hook_feeds, "Same tensor is fed by a SessionRunHook and user."
    )
    merged = dict(hook_feeds)
    merged.update(user_feeds)
    return merged


def merge_run_options(options: Any, incoming: Any) -> None:
    """Merges ``incoming`` RunOptions into ``options`` exactly as native ``_HookedSession``.

    Numerical fields take the larger value, booleans are OR-ed and the debug tensor watch options
    are concatenated.
    """
    options.trace_level = max(options.trace_level, incoming.trace_level)
    options.timeout_in_ms = max(options.timeout_in_ms, incoming.timeout_in_ms)
    options.inter_op_thread_pool = max(options.inter_op_thread_pool, incoming.inter_op_thread_pool)
    options.output_partition_graphs = max(
        options.output_partition_graphs, incoming.output_partition_graphs
    )
    options.debug_options.debug_tensor_watch_opts.extend(
        incoming.debug_options.debug_tensor_watch_opts
    )
    options.debug_options.reset_disk_byte_usage = (
        options.debug_options.reset_disk_byte_usage or incoming.debug_options.reset_disk_byte_usage
    )
    options.report_tensor_allocations_upon_oom = (
        options.report_tensor_allocations_upon_oom or incoming.report_tensor_allocations_upon_oom
    )
