# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The weight files of a model directory, checked before they are loaded.

safetensors refuses a truncated or corrupted file with a message that does
not name it ("Error while deserializing header: incomplete metadata, file
not fully covered"). `check_weights(directory)` reads the header of every
`*.safetensors` file of a directory, and of every shard its
`*.safetensors.index.json` names, and raises `WeightsFileError` naming the
file and what is wrong with it: shorter than its header says (truncated),
a header that is not safetensors', or a shard that is missing. The data
bytes themselves are not read (safetensors keeps no checksum).

`from_t5` and `mtf-synthesizer-from-t5` check a T5 directory so; call
`check_weights(path)` before `from_pretrained(path)` to have a broken file
of a saved Synthesizer named. Only the standard library is imported.
"""

import json
import math
import os
import struct
from typing import Any, Dict, List, Tuple

# Bytes per element of safetensors' dtypes.
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
               "F8_E8M0": 1, "U16": 2, "I16": 2, "F16": 2, "BF16": 2,
               "U32": 4, "I32": 4, "F32": 4, "U64": 8, "I64": 8, "F64": 8,
               "C64": 8}
# The longest header safetensors reads (100 MB).
MAX_HEADER = 100_000_000


class WeightsFileError(OSError):
  """A weights file that cannot be loaded; the message names it."""


def _header(path: str, size: int) -> Tuple[Dict[str, Any], int]:
  """The JSON header of a safetensors file and its length, or why none."""
  if size < 8:
    raise WeightsFileError(
        "%s is not a whole safetensors file: %d bytes, fewer than the 8 of "
        "its header's length (truncated?)" % (path, size))
  with open(path, "rb") as f:
    (length,) = struct.unpack("<Q", f.read(8))
    if length > MAX_HEADER or 8 + length > size:
      raise WeightsFileError(
          "%s is not a whole safetensors file: its header says %d bytes, "
          "the file has %d after the length (truncated or not "
          "safetensors?)" % (path, length, size - 8))
    raw = f.read(length)
  try:
    header = json.loads(raw.decode("utf-8"))
  except (UnicodeDecodeError, ValueError) as e:
    raise WeightsFileError("%s has a corrupted safetensors header (%s)" %
                           (path, e)) from None
  if not isinstance(header, dict):
    raise WeightsFileError("%s has a corrupted safetensors header (not a "
                           "JSON object)" % path)
  return header, length


def check_safetensors(path: str) -> None:
  """Checks that a safetensors file is whole.

  Args:
    path: the file.

  Raises:
    WeightsFileError: naming the file: missing, shorter than its header
      says, a header that is not valid, or a tensor whose bytes do not fit
      its shape.
  """
  if not os.path.isfile(path):
    raise WeightsFileError("%s: no such weights file" % path)
  size = os.path.getsize(path)
  header, length = _header(path, size)
  data = size - 8 - length
  end = 0
  for name, entry in header.items():
    if name == "__metadata__":
      continue
    try:
      start, stop = (int(x) for x in entry["data_offsets"])
      shape = [int(n) for n in entry["shape"]]
      dtype = entry["dtype"]
    except (KeyError, TypeError, ValueError):
      raise WeightsFileError("%s has a corrupted safetensors header (the "
                             "entry of %r)" % (path, name)) from None
    expected = DTYPE_BYTES.get(dtype)
    if stop < start or (expected is not None and
                        stop - start != expected * math.prod(shape)):
      raise WeightsFileError(
          "%s has a corrupted safetensors header: %r (%s %s) spans bytes "
          "%d to %d" % (path, name, dtype, shape, start, stop))
    end = max(end, stop)
  if end > data:
    raise WeightsFileError(
        "%s is truncated: its tensors need %d bytes of data, the file has "
        "%d" % (path, end, data))
  if end < data:
    raise WeightsFileError(
        "%s is not a whole safetensors file: %d bytes after its last "
        "tensor" % (path, data - end))


def weight_files(directory: str) -> List[str]:
  """The safetensors files of a model directory, and the shards it names.

  Args:
    directory: a saved model's directory.

  Returns:
    The paths: every `*.safetensors` file, and every file that a
    `*.safetensors.index.json` names (present or not), sorted.
  """
  names = {n for n in os.listdir(directory) if n.endswith(".safetensors")}
  for index in os.listdir(directory):
    if not index.endswith(".safetensors.index.json"):
      continue
    path = os.path.join(directory, index)
    try:
      with open(path) as f:
        weight_map = json.load(f)["weight_map"]
      names.update(weight_map.values())
    except (ValueError, KeyError, TypeError, AttributeError):
      raise WeightsFileError("%s is not a safetensors index (no JSON "
                             "weight_map)" % path) from None
  return [os.path.join(directory, n) for n in sorted(names)]


def check_weights(directory: str) -> None:
  """Checks every safetensors file of a model directory before loading it.

  Args:
    directory: a saved model's directory (anything else is left alone:
      a Hub name is checked by its download).

  Raises:
    WeightsFileError: naming the first file that is missing (a shard of
      the index), truncated or corrupted.
  """
  if not os.path.isdir(directory):
    return
  for path in weight_files(directory):
    check_safetensors(path)
