"""Event files read back for ``check --replaced-by``: what each summary *holds*, per tag and step.

:func:`read_events` reads a folder with TensorBoard's ``EventAccumulator`` (every event kept) and
returns ``{"<kind> <tag>": [(step, value), ...]}``, where the value is what TensorBoard shows:

* ``scalar``: the number (a TF1 ``simple_value`` and a TF2 scalar tensor alike, as TensorBoard
  shows them in one chart);
* ``text``: the decoded strings (a nested list for a tensor of strings);
* ``histogram``: a TF1 histogram's ``min``, ``max``, ``num``, ``sum``, ``sum_squares``, bucket
  limits and counts; a TF2 histogram's ``(left, right, count)`` buckets;
* ``image``: each image's height, width and decoded pixels (``tf.io.decode_image``);
* ``audio``: each clip's sample rate and decoded samples (``tf.audio.decode_wav``);
* ``tensor``: any other tensor's values (a plugin hookbridge does not know: its name, its
  metadata and values, bytes as :class:`Opaque`).

What cannot be read this way is an :class:`Opaque` (its bytes, by digest): a graph, a meta
graph, run metadata, an image or clip that does not decode. Equal bytes are the same; different
bytes cannot be told equal or not (``unknown``, never ``same``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from typing import Any

import numpy as np

__all__ = ["Opaque", "read_events"]

#: Plugins whose tensors are read as what they show (others: ``tensor <tag>``).
_KINDS = {"scalars": "scalar", "text": "text", "histograms": "histogram", "images": "image",
          "audio": "audio"}


@dataclasses.dataclass(frozen=True)
class Opaque:
    """Content check does not decode: what it is, and its bytes' SHA-256."""

    what: str
    digest: str

    @classmethod
    def of(cls, what: str, data: bytes) -> Opaque:
        return cls(what, hashlib.sha256(data).hexdigest()[:16])

    def __repr__(self) -> str:
        return f"<{self.what}, not decoded, sha256 {self.digest}>"


def read_events(folder: str) -> dict[str, Any]:
    """Every summary in ``folder``'s event files (module docstring).

    Raises:
        ImportError: ``tensorboard`` is not installed.
    """
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    kinds = ("scalars", "tensors", "histograms", "images", "audio", "compressedHistograms")
    acc = EventAccumulator(folder, size_guidance=dict.fromkeys(kinds, 0))
    quiet = logging.getLogger("tensorboard")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # "more than one graph event per run": not a finding here
    try:
        acc.Reload()
    finally:
        quiet.setLevel(level)
    tags = acc.Tags()
    content: dict[str, Any] = {}
    for tag in tags.get("scalars", []):
        content[f"scalar {tag}"] = [(e.step, float(e.value)) for e in acc.Scalars(tag)]
    for tag in tags.get("tensors", []):
        plugin = acc.SummaryMetadata(tag).plugin_data
        kind = _KINDS.get(plugin.plugin_name, "tensor")
        values = [(e.step, _tensor_value(kind, e.tensor_proto)) for e in acc.Tensors(tag)]
        if kind == "tensor":
            meta = Opaque.of(f"{plugin.plugin_name or 'no'} plugin metadata", plugin.content)
            values = [(plugin.plugin_name, meta), *values]
        content[f"{kind} {tag}"] = values
    for tag in tags.get("histograms", []):
        content[f"histogram {tag}"] = [
            (e.step, _histogram(e.histogram_value)) for e in acc.Histograms(tag)
        ]
    for tag in tags.get("images", []):
        content[f"image {tag}"] = [
            (e.step, _image(e.encoded_image_string, e.height, e.width)) for e in acc.Images(tag)
        ]
    for tag in tags.get("audio", []):
        content[f"audio {tag}"] = [
            (e.step, _audio(e.encoded_audio_string, e.sample_rate)) for e in acc.Audio(tag)
        ]
    if tags.get("graph"):
        content["graph"] = Opaque.of("graph", _serialized(acc.Graph()))
    if tags.get("meta_graph"):
        content["meta graph"] = Opaque.of("meta graph", _serialized(acc.MetaGraph()))
    for tag in tags.get("run_metadata", []):
        content[f"run metadata {tag}"] = Opaque.of("run metadata", _serialized(acc.RunMetadata(tag)))
    return content


def _serialized(proto: Any) -> bytes:
    return proto.SerializeToString(deterministic=True)


def _tensor_value(kind: str, proto: Any) -> Any:
    import tensorflow as tf

    array = tf.make_ndarray(proto)
    if kind == "scalar":
        return float(array)
    if kind == "image":  # [width, height, png, png, ...]
        cells = array.tolist()
        return [_image(data, int(cells[1]), int(cells[0])) for data in cells[2:]]
    if kind == "audio":  # [[wav, label], ...]
        return [
            (_audio(wav, None), _text(label)) for wav, label in np.reshape(array, (-1, 2)).tolist()
        ]
    if array.dtype.kind in "OSU":
        return _text(array.tolist())
    return array


def _text(value: Any) -> Any:
    """Strings decoded (nested lists kept); bytes that are not UTF-8 stay :class:`Opaque`."""
    if isinstance(value, list):
        return [_text(v) for v in value]
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return Opaque.of("bytes", value)
    return value


def _histogram(h: Any) -> dict[str, Any]:
    return {
        "min": float(h.min), "max": float(h.max), "num": float(h.num), "sum": float(h.sum),
        "sum_squares": float(h.sum_squares),
        "bucket_limit": np.asarray(h.bucket_limit, dtype=np.float64),
        "bucket": np.asarray(h.bucket, dtype=np.float64),
    }


def _image(data: bytes, height: int, width: int) -> Any:
    import tensorflow as tf

    try:
        pixels = tf.io.decode_image(data, expand_animations=False).numpy()
    except (tf.errors.InvalidArgumentError, ValueError):
        return (height, width, Opaque.of("image", data))
    return (height, width, pixels)


def _audio(data: bytes, sample_rate: float | None) -> Any:
    import tensorflow as tf

    try:
        samples, rate = tf.audio.decode_wav(data)
    except (tf.errors.InvalidArgumentError, ValueError):
        return (sample_rate, Opaque.of("audio", data))
    return (float(rate.numpy()) if sample_rate is None else float(sample_rate), samples.numpy())
