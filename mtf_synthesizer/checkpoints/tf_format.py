# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""TensorFlow's checkpoint format, read without TensorFlow.

The checkpoints mesh writes (a `tf.train.Saver`'s, TensorFlow's "tensor
bundle") are read here with NumPy, `ml_dtypes` (bfloat16) and `protobuf`
only, so that a program that has no TensorFlow (the JAX side) reads a mesh
model directory:

    reader = tf_format.load_checkpoint("/path/to/model_dir")
    reader.variable_names()   # ["decoder/block_000/...", ..., "global_step"]
    reader.read("shared/embedding")   # np.ndarray, bfloat16 as mesh saves it

A checkpoint is a prefix (`model_dir/model.ckpt-1000`) and its files:

  * `PREFIX.index`: a table in LevelDB's format, written without
    compression: data blocks of sorted keys (each key stored as the length
    it shares with the key before, then the rest; restart points where a
    key is stored whole), an index block with one handle (offset, size) per
    data block, a metaindex block (empty), and a 48-byte footer that holds
    the handles of those two blocks and the magic number 0xdb4775248b80fb57.
    Each block ends with a type byte (0: not compressed) and the masked
    CRC-32C of its contents and that byte. The key "" holds a
    BundleHeaderProto (number of data shards, byte order, version); every
    other key is a variable's name and holds its BundleEntryProto (dtype,
    shape, shard, offset, size, masked CRC-32C of its bytes).
  * `PREFIX.data-SSSSS-of-NNNNN`: the shards, each variable's bytes at its
    offset, as a little-endian array in C order (a string tensor: the
    lengths as varints, their checksum, then the bytes).

The protocol messages (the index's BundleHeaderProto and BundleEntryProto,
the state file's CheckpointState) are built at import from a descriptor
written here, with the field numbers of TensorFlow's tensor_bundle.proto,
tensor_shape.proto, tensor_slice.proto, types.proto, versions.proto and
checkpoint_state.proto, in a descriptor pool of their own: no generated
module of TensorFlow is needed, and TensorFlow's own messages, where it is
imported too, are left alone.

Everything is checked before a value is returned: the footer's magic, every
block's checksum, the keys' order, each entry's message, that every shard is
there and long enough for the variables it holds, and each variable's own
checksum and size. Any failure raises `CheckpointError`, naming the file and
the variable; nothing is returned in part. A `gs://` (or any other URL) path
is read through `fsspec` (with `gcsfs` for Google Cloud Storage) when they
are installed.

CRC-32C is computed by `google_crc32c` when its C library is installed (as
it is wherever `gcsfs` is), else here: a table-driven loop for short inputs and,
for long ones, the same table applied with NumPy to many stretches of the
input at once, whose CRCs are then combined (a CRC is linear in its input
and in its starting register).
"""

import dataclasses
import difflib
import functools
import os
import posixpath
import struct
from typing import (BinaryIO, Dict, Iterable, List, Optional, Sequence,
                    Tuple)

import ml_dtypes
import numpy as np

from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool
from google.protobuf import message as message_lib
from google.protobuf import message_factory
from google.protobuf import text_format

try:
  import google_crc32c  # pylint: disable=g-import-not-at-top
except ImportError:
  google_crc32c = None
# Its C library, not its pure-Python stand-in (slower than the NumPy here).
if getattr(google_crc32c, "implementation", None) != "c":
  google_crc32c = None

INDEX_SUFFIX = ".index"
# The file that a Saver writes beside its checkpoints, naming the latest.
STATE_FILE = "checkpoint"
TABLE_MAGIC = 0xdb4775248b80fb57
FOOTER_SIZE = 48
BLOCK_TRAILER_SIZE = 5
# TensorFlow's bundle versions: this reader reads what version 1 writes.
BUNDLE_VERSION = 1


class CheckpointError(Exception):
  """A checkpoint that cannot be read: missing, cut short, corrupted, or
  holding what this reader does not know (the message says which)."""


def data_file(prefix: str, shard: int, num_shards: int) -> str:
  """The path of a checkpoint's data shard.

  Args:
    prefix: the checkpoint prefix.
    shard: the shard's index, from 0.
    num_shards: how many shards the checkpoint has.

  Returns:
    `PREFIX.data-SSSSS-of-NNNNN`.
  """
  return "%s.data-%05d-of-%05d" % (prefix, shard, num_shards)


# CRC-32C (Castagnoli), as TensorFlow checksums its files.

_CRC32C_POLYNOMIAL = 0x82F63B78  # bit-reversed 0x1EDC6F41
_MASK_DELTA = 0xa282ead8
_U32 = 0xFFFFFFFF


def _byte_tables() -> List[List[int]]:
  """Tables of the register after one byte, and after 1-3 more zero bytes."""
  first = []
  for byte in range(256):
    register = byte
    for _ in range(8):
      register = (register >> 1) ^ (_CRC32C_POLYNOMIAL if register & 1 else 0)
    first.append(register)
  tables = [first]
  for _ in range(3):
    tables.append([(r >> 8) ^ first[r & 0xFF] for r in tables[-1]])
  return tables


_TABLES = _byte_tables()
_NP_TABLES = [np.array(t, dtype=np.uint32) for t in _TABLES]
# Below this many bytes the plain loop is as fast as the NumPy lanes.
_LANES_FROM = 4096


def _register_after(register: int, data) -> int:
  """The CRC register after `data`, one byte at a time."""
  table = _TABLES[0]
  for byte in data:
    register = table[(register ^ byte) & 0xFF] ^ (register >> 8)
  return register


def _apply(columns: Sequence[int], value: int) -> int:
  """A linear map of 32-bit registers (its columns) applied to a value."""
  out, bit = 0, 0
  while value:
    if value & 1:
      out ^= columns[bit]
    value >>= 1
    bit += 1
  return out


@functools.lru_cache(maxsize=None)
def _zeros_tables(log2_length: int) -> Tuple[Tuple[int, ...], ...]:
  """Byte tables of the map: register -> register after 2**n zero bytes.

  Args:
    log2_length: n.

  Returns:
    Four tables; the map of a register r is the XOR of the k-th table at
    its k-th byte.
  """
  first = _TABLES[0]
  columns = [first[(1 << bit) & 0xFF] ^ ((1 << bit) >> 8) for bit in range(32)]
  for _ in range(log2_length):  # squared: twice as many zero bytes
    columns = [_apply(columns, c) for c in columns]
  tables = []
  for byte in range(4):
    table = [0] * 256
    for value in range(1, 256):
      low = value & -value
      table[value] = table[value ^ low] ^ columns[8 * byte + low.bit_length()
                                                   - 1]
    tables.append(tuple(table))
  return tuple(tables)


def _register_after_lanes(register: int, data: memoryview) -> int:
  """The CRC register after `data`, with NumPy on many lanes at once.

  The data is cut into lanes of 2**n bytes. The register of each lane,
  started from 0, is computed for all lanes together, four bytes per step;
  then, since the register after A then B is the register after A moved
  through len(B) zero bytes, XOR the register of B started from 0, the
  lanes are combined in order. The bytes left over take the same way with
  shorter lanes.

  Args:
    register: the register before the data.
    data: the bytes.

  Returns:
    The register after them.
  """
  while len(data) >= _LANES_FROM:
    log2_length = max(6, int(np.log2(np.sqrt(len(data) / 2))))
    length = 1 << log2_length
    lanes = len(data) // length
    words = np.frombuffer(data, dtype="<u4", count=lanes * length // 4)
    words = np.ascontiguousarray(words.reshape(lanes, length // 4).T)
    t0, t1, t2, t3 = _NP_TABLES
    state = np.zeros(lanes, dtype=np.uint32)
    for row in words:
      state ^= row
      state = (t3[state & 0xFF] ^ t2[(state >> 8) & 0xFF] ^
               t1[(state >> 16) & 0xFF] ^ t0[state >> 24])
    z0, z1, z2, z3 = _zeros_tables(log2_length)
    for lane in state.tolist():
      register = (z0[register & 0xFF] ^ z1[(register >> 8) & 0xFF] ^
                  z2[(register >> 16) & 0xFF] ^ z3[register >> 24] ^ lane)
    data = data[lanes * length:]
  return _register_after(register, data)


def crc32c(data, crc: int = 0) -> int:
  """CRC-32C (Castagnoli) of bytes, or `crc` extended by them.

  Args:
    data: bytes, a bytearray or a memoryview of bytes.
    crc: the CRC-32C of what came before `data` (0 for none).

  Returns:
    The CRC-32C of what came before followed by `data`.
  """
  if google_crc32c is not None:
    return google_crc32c.extend(crc, bytes(data))
  view = memoryview(data).cast("B")
  return _register_after_lanes(crc ^ _U32, view) ^ _U32


def mask_crc32c(crc: int) -> int:
  """A CRC-32C masked as TensorFlow stores it in its files.

  Args:
    crc: a CRC-32C.

  Returns:
    The CRC rotated right by 15 bits, plus 0xa282ead8 (modulo 2**32).
  """
  rotated = ((crc >> 15) | (crc << 17)) & _U32
  return (rotated + _MASK_DELTA) & _U32


def masked_crc32c(data) -> int:
  """TensorFlow's checksum of bytes: their masked CRC-32C.

  Args:
    data: bytes, a bytearray or a memoryview of bytes.

  Returns:
    `mask_crc32c(crc32c(data))`.
  """
  return mask_crc32c(crc32c(data))


# The protocol messages.


def _field(message, name, number, kind, type_name=None, repeated=False,
           oneof_index=None):
  field = message.field.add(
      name=name, number=number, type=kind,
      label=(descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED if repeated
             else descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL))
  if type_name:
    field.type_name = type_name
  if oneof_index is not None:
    field.oneof_index = oneof_index
  return field


# types.proto's DataType, the values a bundle may hold (no reference types).
_DATA_TYPES = (
    ("DT_INVALID", 0), ("DT_FLOAT", 1), ("DT_DOUBLE", 2), ("DT_INT32", 3),
    ("DT_UINT8", 4), ("DT_INT16", 5), ("DT_INT8", 6), ("DT_STRING", 7),
    ("DT_COMPLEX64", 8), ("DT_INT64", 9), ("DT_BOOL", 10), ("DT_QINT8", 11),
    ("DT_QUINT8", 12), ("DT_QINT32", 13), ("DT_BFLOAT16", 14),
    ("DT_QINT16", 15), ("DT_QUINT16", 16), ("DT_UINT16", 17),
    ("DT_COMPLEX128", 18), ("DT_HALF", 19), ("DT_RESOURCE", 20),
    ("DT_VARIANT", 21), ("DT_UINT32", 22), ("DT_UINT64", 23),
    ("DT_FLOAT8_E5M2", 24), ("DT_FLOAT8_E4M3FN", 25), ("DT_INT4", 29),
    ("DT_UINT4", 30))


def _bundle_file() -> descriptor_pb2.FileDescriptorProto:
  """The descriptor of the messages a checkpoint's index holds."""
  f = descriptor_pb2.FieldDescriptorProto
  proto = descriptor_pb2.FileDescriptorProto(
      name="mtf_synthesizer/tensor_bundle.proto", package="tensorflow",
      syntax="proto3")
  data_type = proto.enum_type.add(name="DataType")
  for name, number in _DATA_TYPES:
    data_type.value.add(name=name, number=number)

  shape = proto.message_type.add(name="TensorShapeProto")
  dim = shape.nested_type.add(name="Dim")
  _field(dim, "size", 1, f.TYPE_INT64)
  _field(dim, "name", 2, f.TYPE_STRING)
  _field(shape, "dim", 2, f.TYPE_MESSAGE, ".tensorflow.TensorShapeProto.Dim",
         repeated=True)
  _field(shape, "unknown_rank", 3, f.TYPE_BOOL)

  tensor_slice = proto.message_type.add(name="TensorSliceProto")
  extent = tensor_slice.nested_type.add(name="Extent")
  extent.oneof_decl.add(name="has_length")
  _field(extent, "start", 1, f.TYPE_INT64)
  _field(extent, "length", 2, f.TYPE_INT64, oneof_index=0)
  _field(tensor_slice, "extent", 1, f.TYPE_MESSAGE,
         ".tensorflow.TensorSliceProto.Extent", repeated=True)

  version = proto.message_type.add(name="VersionDef")
  _field(version, "producer", 1, f.TYPE_INT32)
  _field(version, "min_consumer", 2, f.TYPE_INT32)
  _field(version, "bad_consumers", 3, f.TYPE_INT32, repeated=True)

  header = proto.message_type.add(name="BundleHeaderProto")
  endianness = header.enum_type.add(name="Endianness")
  endianness.value.add(name="LITTLE", number=0)
  endianness.value.add(name="BIG", number=1)
  _field(header, "num_shards", 1, f.TYPE_INT32)
  _field(header, "endianness", 2, f.TYPE_ENUM,
         ".tensorflow.BundleHeaderProto.Endianness")
  _field(header, "version", 3, f.TYPE_MESSAGE, ".tensorflow.VersionDef")

  entry = proto.message_type.add(name="BundleEntryProto")
  _field(entry, "dtype", 1, f.TYPE_ENUM, ".tensorflow.DataType")
  _field(entry, "shape", 2, f.TYPE_MESSAGE, ".tensorflow.TensorShapeProto")
  _field(entry, "shard_id", 3, f.TYPE_INT32)
  _field(entry, "offset", 4, f.TYPE_INT64)
  _field(entry, "size", 5, f.TYPE_INT64)
  _field(entry, "crc32c", 6, f.TYPE_FIXED32)
  _field(entry, "slices", 7, f.TYPE_MESSAGE, ".tensorflow.TensorSliceProto",
         repeated=True)

  # checkpoint_state.proto: the state file's message (text format).
  state = proto.message_type.add(name="CheckpointState")
  _field(state, "model_checkpoint_path", 1, f.TYPE_STRING)
  _field(state, "all_model_checkpoint_paths", 2, f.TYPE_STRING,
         repeated=True)
  _field(state, "all_model_checkpoint_timestamps", 3, f.TYPE_DOUBLE,
         repeated=True)
  _field(state, "last_preserved_timestamp", 4, f.TYPE_DOUBLE)
  return proto


def _message_classes() -> Dict[str, type]:
  """The message classes, in a pool of their own (not TensorFlow's)."""
  pool = descriptor_pool.DescriptorPool()
  pool.AddSerializedFile(_bundle_file().SerializeToString())
  names = ("BundleHeaderProto", "BundleEntryProto", "CheckpointState")
  get = getattr(message_factory, "GetMessageClass", None)
  if get is None:  # protobuf before 4.21
    factory = message_factory.MessageFactory(pool)
    get = factory.GetPrototype
  classes = {n: get(pool.FindMessageTypeByName("tensorflow." + n))
             for n in names}
  classes["DataType"] = pool.FindEnumTypeByName("tensorflow.DataType")
  return classes


_MESSAGES = _message_classes()
BundleHeaderProto = _MESSAGES["BundleHeaderProto"]
BundleEntryProto = _MESSAGES["BundleEntryProto"]
CheckpointState = _MESSAGES["CheckpointState"]
_DATA_TYPE_NAMES = {v.number: v.name
                    for v in _MESSAGES["DataType"].values}

# DataType -> (TensorFlow's name of it, NumPy's little-endian dtype).
_DTYPES = {
    1: ("float32", np.dtype("<f4")),
    2: ("float64", np.dtype("<f8")),
    3: ("int32", np.dtype("<i4")),
    4: ("uint8", np.dtype("u1")),
    5: ("int16", np.dtype("<i2")),
    6: ("int8", np.dtype("i1")),
    7: ("string", np.dtype(object)),
    8: ("complex64", np.dtype("<c8")),
    9: ("int64", np.dtype("<i8")),
    10: ("bool", np.dtype("?")),
    14: ("bfloat16", np.dtype(ml_dtypes.bfloat16)),
    17: ("uint16", np.dtype("<u2")),
    18: ("complex128", np.dtype("<c16")),
    19: ("float16", np.dtype("<f2")),
    22: ("uint32", np.dtype("<u4")),
    23: ("uint64", np.dtype("<u8")),
    24: ("float8_e5m2", np.dtype(ml_dtypes.float8_e5m2)),
    25: ("float8_e4m3fn", np.dtype(ml_dtypes.float8_e4m3fn)),
}
_STRING = 7


# The table (the .index file).


def _varint(data: bytes, pos: int, end: int, where: str) -> Tuple[int, int]:
  """Decodes a base-128 varint at data[pos:end]; returns (value, next)."""
  value, shift = 0, 0
  while True:
    if pos >= end or shift > 63:
      raise CheckpointError("%s: a varint runs past its end" % where)
    byte = data[pos]
    pos += 1
    value |= (byte & 0x7F) << shift
    if not byte & 0x80:
      return value, pos
    shift += 7


def _block(data: bytes, handle: Tuple[int, int], where: str) -> bytes:
  """A block's contents, its trailer checked.

  Args:
    data: the whole table file.
    handle: the block's (offset, size).
    where: the file and block, for errors.

  Returns:
    The block's contents (without the trailer).

  Raises:
    CheckpointError: a block outside the file, compressed, or whose
      checksum differs.
  """
  offset, size = handle
  end = offset + size
  if end + BLOCK_TRAILER_SIZE > len(data) - FOOTER_SIZE:
    raise CheckpointError("%s: the block at %d (%d bytes) runs past the end "
                          "of the table" % (where, offset, size))
  contents = data[offset:end]
  kind = data[end]
  stored, = struct.unpack_from("<I", data, end + 1)
  if masked_crc32c(data[offset:end + 1]) != stored:
    raise CheckpointError("%s: the checksum of the block at %d (%d bytes) "
                          "does not match: the file is corrupted"
                          % (where, offset, size))
  if kind != 0:
    raise CheckpointError("%s: the block at %d is compressed (type %d); "
                          "TensorFlow writes checkpoint indexes without "
                          "compression, and so only those are read"
                          % (where, offset, kind))
  return contents


def _block_entries(block: bytes, where: str) -> List[Tuple[bytes, bytes]]:
  """The (key, value) entries of a block, keys rebuilt from their prefixes.

  Args:
    block: a block's contents.
    where: the file and block, for errors.

  Returns:
    The entries in order.

  Raises:
    CheckpointError: a block whose entries or restart points do not parse.
  """
  if len(block) < 4:
    raise CheckpointError("%s: a block of %d bytes" % (where, len(block)))
  num_restarts, = struct.unpack_from("<I", block, len(block) - 4)
  limit = len(block) - 4 - 4 * num_restarts
  if num_restarts < 1 or limit < 0:
    raise CheckpointError("%s: a block with %d restart points in %d bytes"
                          % (where, num_restarts, len(block)))
  restarts = struct.unpack_from("<%dI" % num_restarts, block, limit)
  entries, whole_keys = [], set()
  key, pos = b"", 0
  while pos < limit:
    start = pos
    shared, pos = _varint(block, pos, limit, where)
    unshared, pos = _varint(block, pos, limit, where)
    value_size, pos = _varint(block, pos, limit, where)
    if shared > len(key) or pos + unshared + value_size > limit:
      raise CheckpointError("%s: an entry at %d runs past its block"
                            % (where, start))
    key = key[:shared] + block[pos:pos + unshared]
    pos += unshared
    entries.append((key, block[pos:pos + value_size]))
    pos += value_size
    if shared == 0:
      whole_keys.add(start)
  if not set(restarts) <= whole_keys:
    raise CheckpointError("%s: a restart point is not at a whole key" % where)
  return entries


def read_table(data: bytes, where: str) -> List[Tuple[bytes, bytes]]:
  """Every entry of a table in LevelDB's format (written without
  compression), every block's checksum checked.

  Args:
    data: the table file's bytes.
    where: its name, for errors.

  Returns:
    The (key, value) entries in key order.

  Raises:
    CheckpointError: not such a table, or a corrupted one.
  """
  if len(data) < FOOTER_SIZE:
    raise CheckpointError("%s is %d bytes, shorter than a table's footer "
                          "(%d): cut short" % (where, len(data), FOOTER_SIZE))
  footer = len(data) - FOOTER_SIZE
  magic, = struct.unpack_from("<Q", data, len(data) - 8)
  if magic != TABLE_MAGIC:
    raise CheckpointError("%s does not end with a table's magic number "
                          "(0x%x, not 0x%x): not a checkpoint index, or cut "
                          "short" % (where, magic, TABLE_MAGIC))
  handles, pos = [], footer
  for _ in range(4):
    value, pos = _varint(data, pos, len(data) - 8, where + " (footer)")
    handles.append(value)
  metaindex = (handles[0], handles[1])
  index = (handles[2], handles[3])
  _block(data, metaindex, where + " (metaindex block)")
  entries = []
  for _, handle in _block_entries(
      _block(data, index, where + " (index block)"), where + " (index block)"):
    offset, pos = _varint(handle, 0, len(handle), where + " (index block)")
    size, _ = _varint(handle, pos, len(handle), where + " (index block)")
    block_where = "%s (data block at %d)" % (where, offset)
    entries.extend(_block_entries(_block(data, (offset, size), block_where),
                                  block_where))
  for (before, _), (after, _) in zip(entries, entries[1:]):
    if not before < after:
      raise CheckpointError("%s: keys out of order (%r, then %r)"
                            % (where, before, after))
  return entries


# Files: local paths, or URLs through fsspec.


class _Files:
  """Reads files of one place: the local disk, or an fsspec file system."""

  def __init__(self, path: str):
    self._fs = None
    if "://" in path:
      try:
        import fsspec  # pylint: disable=g-import-not-at-top
      except ImportError:
        raise ImportError(
            "reading %s needs fsspec and its file system for the URL "
            "(gs://: gcsfs): pip install fsspec gcsfs" % path) from None
      try:
        self._fs, _ = fsspec.core.url_to_fs(path)
      except (ImportError, ValueError) as e:
        raise ImportError(
            "fsspec cannot read %s (%s): for gs:// paths, pip install gcsfs"
            % (path, e)) from None

  def join(self, *parts: str) -> str:
    return posixpath.join(*parts) if self._fs else os.path.join(*parts)

  def isabs(self, path: str) -> bool:
    return "://" in path or os.path.isabs(path)

  def exists(self, path: str) -> bool:
    return self._fs.exists(path) if self._fs else os.path.exists(path)

  def isdir(self, path: str) -> bool:
    return self._fs.isdir(path) if self._fs else os.path.isdir(path)

  def size(self, path: str) -> int:
    return self._fs.size(path) if self._fs else os.path.getsize(path)

  def listdir(self, path: str) -> List[str]:
    if self._fs:
      return [posixpath.basename(p.rstrip("/"))
              for p in self._fs.ls(path, detail=False)]
    return os.listdir(path)

  def open(self, path: str) -> BinaryIO:
    return self._fs.open(path, "rb") if self._fs else open(path, "rb")

  def read(self, path: str) -> bytes:
    with self.open(path) as f:
      return f.read()


# The checkpoint.


@dataclasses.dataclass(frozen=True)
class TensorEntry:
  """Where and how a checkpoint holds a variable.

  Attributes:
    name: the variable's name.
    dtype: TensorFlow's name of its dtype ("bfloat16", "float32", ...), or
      the DataType's name ("DT_RESOURCE") for one this reader cannot read.
    shape: its shape.
    shard: the data shard that holds its bytes.
    offset: where they start in that shard.
    size: how many bytes.
    crc32c: their masked CRC-32C, as stored.
    sliced: saved in slices (a partitioned variable), not read here.
  """
  name: str
  dtype: str
  shape: Tuple[int, ...]
  shard: int
  offset: int
  size: int
  crc32c: int
  sliced: bool


class CheckpointReader:
  """A TensorFlow checkpoint (a Saver's) read without TensorFlow.

  Opening reads and checks the index whole, and checks that every data
  shard is there and holds the bytes its variables point at; `read` checks
  each variable's checksum.

  Attributes:
    prefix: the checkpoint prefix.
    num_shards: its data shards.
  """

  def __init__(self, prefix: str):
    """Opens a checkpoint.

    Args:
      prefix: the checkpoint prefix (`model_dir/model.ckpt-1000`, the
        files' common start), a local path or a URL such as `gs://...`.

    Raises:
      CheckpointError: no checkpoint there, or one whose index is corrupted
        or whose shards are missing or cut short (named).
      ImportError: a URL without fsspec (or its file system) installed.
    """
    self.prefix = prefix
    self._files = _Files(prefix)
    index = prefix + INDEX_SUFFIX
    if not self._files.exists(index):
      hint = (" (a directory: load_checkpoint() finds its latest checkpoint)"
              if self._files.isdir(prefix) else "")
      raise CheckpointError("no checkpoint at %s: %s not found%s"
                            % (prefix, index, hint))
    table = read_table(self._files.read(index), index)
    if not table or table[0][0] != b"":
      raise CheckpointError("%s has no bundle header (the entry of key \"\"):"
                            " not a checkpoint index" % index)
    header = BundleHeaderProto()
    try:
      header.ParseFromString(table[0][1])
    except message_lib.DecodeError as e:
      raise CheckpointError("%s: its header does not parse: %s"
                            % (index, e)) from None
    if header.endianness != 0:
      raise CheckpointError("%s was written big-endian; only little-endian "
                            "checkpoints are read" % index)
    if header.version.min_consumer > BUNDLE_VERSION:
      raise CheckpointError(
          "%s needs a reader of bundle version %d or later (this one reads "
          "version %d)" % (index, header.version.min_consumer,
                           BUNDLE_VERSION))
    if header.num_shards < 1:
      raise CheckpointError("%s: its header gives %d data shards"
                            % (index, header.num_shards))
    self.num_shards = header.num_shards
    self._entries = {}
    for key, value in table[1:]:
      if key.startswith(b"\x00"):
        continue  # a slice's data of a partitioned variable (never read)
      name = key.decode("utf-8", "replace")
      entry = BundleEntryProto()
      try:
        entry.ParseFromString(value)
      except message_lib.DecodeError as e:
        raise CheckpointError("%s: the entry of %s does not parse: %s"
                              % (index, name, e)) from None
      self._entries[name] = self._tensor_entry(name, entry)
    self._check_shards()

  def _tensor_entry(self, name: str, entry) -> TensorEntry:
    if entry.dtype in _DTYPES:
      dtype = _DTYPES[entry.dtype][0]
    else:
      dtype = _DATA_TYPE_NAMES.get(entry.dtype, "DataType %d" % entry.dtype)
    if entry.shape.unknown_rank or any(d.size < 0 for d in entry.shape.dim):
      raise CheckpointError("%s%s: %s has no full shape"
                            % (self.prefix, INDEX_SUFFIX, name))
    if not 0 <= entry.shard_id < self.num_shards:
      raise CheckpointError("%s%s: %s is in shard %d of %d"
                            % (self.prefix, INDEX_SUFFIX, name,
                               entry.shard_id, self.num_shards))
    return TensorEntry(
        name=name, dtype=dtype, shape=tuple(d.size for d in entry.shape.dim),
        shard=entry.shard_id, offset=entry.offset, size=entry.size,
        crc32c=entry.crc32c, sliced=bool(entry.slices))

  def _check_shards(self) -> None:
    """Every shard is there and long enough for what it holds."""
    needed = [0] * self.num_shards
    holder = [None] * self.num_shards
    for entry in self._entries.values():
      if not entry.sliced and entry.offset + entry.size >= needed[entry.shard]:
        needed[entry.shard] = entry.offset + entry.size
        holder[entry.shard] = entry.name
    for shard in range(self.num_shards):
      path = data_file(self.prefix, shard, self.num_shards)
      if not self._files.exists(path):
        raise CheckpointError("checkpoint %s: its data shard %s is missing "
                              "(shard %d of %d)" % (self.prefix, path, shard,
                                                     self.num_shards))
      size = self._files.size(path)
      if size < needed[shard]:
        raise CheckpointError(
            "checkpoint %s: its data shard %s is cut short: %d bytes, and %s "
            "ends at byte %d" % (self.prefix, path, size, holder[shard],
                                 needed[shard]))

  def __repr__(self) -> str:
    return "CheckpointReader(%r)" % self.prefix

  def __contains__(self, name: str) -> bool:
    return name in self._entries

  def variable_names(self) -> List[str]:
    """Every variable's name, sorted."""
    return sorted(self._entries)

  def entry(self, name: str) -> TensorEntry:
    """Where and how the checkpoint holds a variable.

    Args:
      name: the variable's name.

    Returns:
      Its TensorEntry.

    Raises:
      CheckpointError: no variable of that name (the closest are named).
    """
    found = self._entries.get(name)
    if found is None:
      close = difflib.get_close_matches(name, list(self._entries), n=3)
      raise CheckpointError(
          "checkpoint %s has no variable %r (it has %d%s)" % (
              self.prefix, name, len(self._entries),
              "; closest: " + ", ".join(close) if close else ""))
    return found

  def shape(self, name: str) -> Tuple[int, ...]:
    """A variable's shape.

    Args:
      name: the variable's name.

    Returns:
      Its shape ((), a scalar's).
    """
    return self.entry(name).shape

  def dtype(self, name: str) -> np.dtype:
    """The NumPy dtype `read` returns for a variable.

    Args:
      name: the variable's name.

    Returns:
      E.g. `ml_dtypes.bfloat16`'s dtype; object (of bytes) for strings.

    Raises:
      CheckpointError: a dtype this reader does not read (named).
    """
    return self._numpy_dtype(self.entry(name))

  def dtype_name(self, name: str) -> str:
    """A variable's dtype as TensorFlow names it ("bfloat16", "int64").

    Args:
      name: the variable's name.

    Returns:
      The name; for a dtype this reader cannot read, the DataType's name.
    """
    return self.entry(name).dtype

  def _numpy_dtype(self, entry: TensorEntry) -> np.dtype:
    for name, dtype in _DTYPES.values():
      if name == entry.dtype:
        return dtype
    raise CheckpointError(
        "checkpoint %s: %s is of dtype %s, which this reader does not read "
        "(it reads %s)" % (self.prefix, entry.name, entry.dtype,
                           ", ".join(n for n, _ in _DTYPES.values())))

  def read(self, name: str) -> np.ndarray:
    """A variable's value, checked against its checksum.

    Args:
      name: the variable's name.

    Returns:
      A new array of its dtype (`dtype(name)`) and shape; bytes objects for
      strings.

    Raises:
      CheckpointError: an unknown name or dtype, or bytes that are missing
        or do not match their checksum (named).
    """
    return self.read_many([name])[name]

  def read_many(self, names: Optional[Iterable[str]] = None
               ) -> Dict[str, np.ndarray]:
    """Several variables' values (each shard opened once), all or none.

    Args:
      names: the variables; all of them when None.

    Returns:
      {name: value}, as `read` gives each.

    Raises:
      CheckpointError: as `read`, for any of them.
    """
    entries = [self.entry(n) for n in
               (self.variable_names() if names is None else names)]
    for entry in entries:
      if entry.sliced:
        raise CheckpointError(
            "checkpoint %s: %s was saved in slices (a partitioned "
            "variable), which this reader does not read"
            % (self.prefix, entry.name))
      self._numpy_dtype(entry)
    values = {}
    for shard in sorted({e.shard for e in entries}):
      path = data_file(self.prefix, shard, self.num_shards)
      with self._files.open(path) as f:
        for entry in sorted((e for e in entries if e.shard == shard),
                            key=lambda e: e.offset):
          f.seek(entry.offset)
          data = f.read(entry.size)
          if len(data) != entry.size:
            raise CheckpointError(
                "checkpoint %s: %s is cut short: %s needs bytes %d to %d, "
                "the file ends at %d" % (self.prefix, path, entry.name,
                                         entry.offset,
                                         entry.offset + entry.size,
                                         entry.offset + len(data)))
          values[entry.name] = self._value(entry, data, path)
    return values

  def _value(self, entry: TensorEntry, data: bytes, path: str) -> np.ndarray:
    """A variable's array from its bytes, their checksum checked."""
    dtype = self._numpy_dtype(entry)
    count = int(np.prod(entry.shape, dtype=np.int64))
    value, detail = None, ""
    if dtype == object:
      value, crc, detail = _strings(data, count)
    else:
      crc = crc32c(data)
    if detail or mask_crc32c(crc) != entry.crc32c:
      raise CheckpointError(
          "checkpoint %s: the checksum of %s (bytes %d to %d of %s) does not "
          "match: the file is corrupted%s" % (
              self.prefix, entry.name, entry.offset, entry.offset + entry.size,
              path, " (%s)" % detail if detail else ""))
    if value is not None:
      return value.reshape(entry.shape)
    if entry.size != count * dtype.itemsize:
      raise CheckpointError(
          "checkpoint %s: %s holds %d bytes, but %d values of %s take %d"
          % (self.prefix, entry.name, entry.size, count, entry.dtype,
             count * dtype.itemsize))
    value = np.frombuffer(bytearray(data), dtype=dtype).reshape(entry.shape)
    return value.astype(dtype.newbyteorder("="), copy=False)


def _strings(data: bytes, count: int) -> Tuple[Optional[np.ndarray], int,
                                                 str]:
  """A string tensor from its bytes, and their CRC-32C as TensorFlow takes it.

  The bytes are the lengths (varints), their masked CRC-32C (of each length
  as 4 little-endian bytes, 8 past 2**32), then the strings; the entry's
  CRC-32C is that of those lengths, that checksum and the strings.

  Args:
    data: the tensor's bytes.
    count: its number of strings.

  Returns:
    (the strings as a flat array of bytes objects, the CRC-32C to check
    against the entry's, ""), or (None, 0, what does not fit) for bytes
    that are not such a tensor.
  """
  lengths, pos, crc = [], 0, 0
  try:
    for _ in range(count):
      length, pos = _varint(data, pos, len(data), "")
      lengths.append(length)
      crc = crc32c(struct.pack("<I" if length <= _U32 else "<Q", length), crc)
  except CheckpointError:
    return None, 0, "its string lengths run past its bytes"
  if pos + 4 > len(data):
    return None, 0, "its string lengths run past its bytes"
  stored, = struct.unpack_from("<I", data, pos)
  if mask_crc32c(crc) != stored:
    return None, 0, "the checksum of its string lengths does not match"
  crc = crc32c(data[pos:pos + 4], crc)
  pos += 4
  if pos + sum(lengths) != len(data):
    return None, 0, "its strings take %d bytes, not %d" % (
        sum(lengths), len(data) - pos)
  crc = crc32c(data[pos:], crc)
  value = np.empty(count, dtype=object)
  for i, length in enumerate(lengths):
    value[i] = bytes(data[pos:pos + length])
    pos += length
  return value, crc, ""


def latest_checkpoint(model_dir: str) -> str:
  """The latest checkpoint of a model directory, as its state file names it.

  Args:
    model_dir: a model directory (a local path or a URL such as `gs://`).

  Returns:
    The checkpoint prefix (relative names joined to `model_dir`).

  Raises:
    CheckpointError: no state file (`checkpoint`), or one that names no
      checkpoint or one whose index is not there (named).
    ImportError: a URL without fsspec (or its file system) installed.
  """
  files = _Files(model_dir)
  state_path = files.join(model_dir, STATE_FILE)
  if not files.exists(state_path):
    if not files.isdir(model_dir):
      raise CheckpointError("no checkpoint in %s: %s" % (
          model_dir, "not a directory" if files.exists(model_dir)
          else "no such directory"))
    indexes = sorted(n for n in files.listdir(model_dir)
                     if n.endswith(INDEX_SUFFIX))
    hint = ("; it holds %s: open one by its prefix" % ", ".join(indexes)
            if indexes else "")
    raise CheckpointError("no checkpoint in %s: it has no %r file (which a "
                          "Saver writes beside its checkpoints)%s"
                          % (model_dir, STATE_FILE, hint))
  state = CheckpointState()
  try:
    text_format.Parse(files.read(state_path).decode("utf-8", "replace"),
                      state)
  except text_format.ParseError as e:
    raise CheckpointError("%s does not parse: %s" % (state_path, e)) from None
  path = state.model_checkpoint_path
  if not path:
    raise CheckpointError("%s names no checkpoint" % state_path)
  if not files.isabs(path):
    path = files.join(model_dir, path)
  if not files.exists(path + INDEX_SUFFIX):
    raise CheckpointError("%s names the checkpoint %s, whose %s is not there"
                          % (state_path, path, path + INDEX_SUFFIX))
  return path


def load_checkpoint(path: str) -> CheckpointReader:
  """Opens a checkpoint by its prefix, or a model directory's latest.

  Args:
    path: a checkpoint prefix or a model directory (a local path or a URL
      such as `gs://...`).

  Returns:
    Its CheckpointReader.

  Raises:
    CheckpointError: no readable checkpoint there (see `latest_checkpoint`
      and `CheckpointReader`).
    ImportError: a URL without fsspec (or its file system) installed.
  """
  files = _Files(path)
  if files.isdir(path) and not files.exists(path + INDEX_SUFFIX):
    path = latest_checkpoint(path)
  return CheckpointReader(path)
