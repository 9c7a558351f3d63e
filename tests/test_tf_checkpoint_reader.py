# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The checkpoint reader without TensorFlow (`checkpoints/tf_format.py`).

TensorFlow is the reference: on every checkpoint the stock CLI writes for
the tiny models of conftest.py (`trained_models`: every variant and mesh's
own attention, bfloat16 weights, float32 slots, the int64 step, in two
shards), on checkpoints a `tf.compat.v1.train.Saver` writes here (float32,
bfloat16, int64 and strings, one shard or two), on tensors of every dtype
that `SaveV2` (the Saver's op) writes, and on an index of several data
blocks, the reader gives the names, dtypes, shapes and bytes that
`tf.train.load_checkpoint` gives. A checkpoint the stock CLI writes on a
`model:2,batch:2` mesh is checked the same way in test_cli_mesh.py, where
it is trained (mesh saves whole variables there too: the same names,
shapes and shards as one device). So is every checkpoint kept in
tests/data/mesh_reference (`tools/mesh_reference.py`: float32 and
bfloat16 variables, encoder-decoders and language models, T5.1.0 and T5.1.1
layouts, a `model:2` run), and a changed byte in one of their shards is
refused.

Bad input gets one `CheckpointError` naming what is wrong: a directory
without a checkpoint, a missing or cut shard, a changed byte in a shard
(the variable's checksum) or in the index (a block's checksum, the footer),
an unknown name, a dtype the reader does not know, a partitioned variable.
docs/export.md's block, run in a fresh interpreter that cannot import
TensorFlow, reads a stock-CLI checkpoint to the same bytes.
"""

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
from typing import Dict

import ml_dtypes
import numpy as np
import pytest
import tensorflow.compat.v1 as tf
from tensorflow.python.framework import dtypes as tf_dtypes  # pylint: disable=g-direct-tensorflow-import

import conftest
from mtf_synthesizer.checkpoints import tf_format
from workbench import mesh_reference

# The table's helpers (tf_format._varint, ._block, ...) count blocks and
# find the footer's padding here.
# pylint: disable=protected-access

CheckpointError = tf_format.CheckpointError
MODELS = conftest.VARIANTS + (conftest.MESH_ATTENTION,)
KEPT_ROOT = os.path.join(conftest.REPO, "tests", "data", "mesh_reference")
KEPT = [c.name for c in mesh_reference.CASES]


def assert_reads_as_tensorflow(prefix: str) -> Dict[str, str]:
  """The reader and `tf.train.load_checkpoint` agree on a checkpoint.

  Same variable names; per variable the same dtype (TensorFlow's name and
  the NumPy dtype of the values), shape and bytes (for strings, the same
  bytes objects).

  Args:
    prefix: a checkpoint prefix.

  Returns:
    {variable name: dtype name}.
  """
  reference = tf.train.load_checkpoint(prefix)
  dtypes = {n: d.name for n, d in
            reference.get_variable_to_dtype_map().items()}
  shapes = reference.get_variable_to_shape_map()
  reader = tf_format.CheckpointReader(prefix)
  assert reader.variable_names() == sorted(dtypes)
  values = reader.read_many()
  assert sorted(values) == sorted(dtypes)
  for name in sorted(dtypes):
    expected = np.asarray(reference.get_tensor(name))
    got = values[name]
    assert reader.dtype_name(name) == dtypes[name], name
    assert reader.shape(name) == tuple(shapes[name]) == got.shape, name
    assert got.dtype == expected.dtype == reader.dtype(name), name
    assert _same(got, expected), name
  return dtypes


def _save_with_saver(prefix: str, sharded: bool) -> Dict[str, np.ndarray]:
  """A checkpoint of a tf.compat.v1.train.Saver, as mesh's CLI saves one.

  Variables in float32 and bfloat16 (mesh's master dtype), an int64
  global_step placed on the CPU (so that a sharded Saver writes two shards,
  as the stock CLI's does), and a string; 163 variables, so that the
  index's data block has several restart points (one per 16 keys).

  Args:
    prefix: the checkpoint prefix.
    sharded: the Saver's `sharded`.

  Returns:
    {name: value saved}.
  """
  rng = np.random.RandomState(3)
  values = {}
  for i in range(80):
    values["block_%03d/kernel" % i] = rng.randn(3, 5 + i % 7).astype(
        np.float32)
    values["block_%03d/kernel_bf16" % i] = rng.randn(4, 2 + i % 5).astype(
        ml_dtypes.bfloat16)
  values["large"] = rng.randn(96, 130).astype(np.float32)
  values["words"] = np.array([b"mesh", b"", "\u00e9t\u00e9".encode("utf-8")],
                             dtype=object)
  graph = tf.Graph()
  with graph.as_default():
    for name, value in values.items():
      tf.get_variable(name, initializer=tf.constant(value))
    with tf.device("/cpu:0"):
      step = tf.train.get_or_create_global_step()
    saver = tf.train.Saver(sharded=sharded, save_relative_paths=True)
    with tf.Session(graph=graph) as session:
      session.run(tf.global_variables_initializer())
      session.run(step.assign(1234))
      values["global_step"] = np.int64(1234)
      saver.save(session, prefix)
  return values


def _save_v2(prefix: str, tensors) -> None:
  """Saves tensors with TensorFlow's SaveV2 op, in a graph of their own.

  Args:
    prefix: the checkpoint prefix.
    tensors: a function that makes {name: tensor} in that graph.
  """
  graph = tf.Graph()
  with graph.as_default():
    named = tensors()
    names = sorted(named)
    save = tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names,
                             shape_and_slices=[""] * len(names),
                             tensors=[named[n] for n in names])
    with tf.Session(graph=graph) as session:
      session.run(save)


@pytest.fixture(scope="module")
def saver_checkpoint(tmp_path_factory) -> str:
  """A two-shard Saver checkpoint in its model directory; its prefix."""
  prefix = str(tmp_path_factory.mktemp("saver") / "model.ckpt")
  _save_with_saver(prefix, sharded=True)
  return prefix


def _copy(prefix: str, directory) -> str:
  """A copy of a checkpoint's files (and its state file); the new prefix."""
  directory.mkdir(exist_ok=True)
  source = os.path.dirname(prefix)
  for path in glob.glob(prefix + ".*") + [os.path.join(source, "checkpoint")]:
    if os.path.exists(path):
      shutil.copy(path, directory / os.path.basename(path))
  return str(directory / os.path.basename(prefix))


def _same(a: np.ndarray, b: np.ndarray) -> bool:
  """Same dtype, shape and values (bytes objects for strings)."""
  if a.dtype != b.dtype or a.shape != b.shape:
    return False
  if a.dtype == object:
    return a.tolist() == b.tolist()
  return a.tobytes() == b.tobytes()


def _flip(path: str, position: int) -> None:
  with open(path, "r+b") as f:
    f.seek(position)
    byte = f.read(1)[0]
    f.seek(position)
    f.write(bytes([byte ^ 0x10]))


# CRC-32C.


@pytest.mark.parametrize("data,expected", [
    (b"123456789", 0xe3069283),           # the CRC's check value
    (bytes(32), 0x8a9136aa),              # RFC 3720, B.4
    (b"\xff" * 32, 0x62a8ab43),
    (bytes(range(32)), 0x46dd794e),
    (bytes(range(31, -1, -1)), 0x113fdb5c),
    (b"", 0),
])
def test_crc32c_known_values(data, expected):
  assert tf_format.crc32c(data) == expected


def test_crc32c_of_long_input_is_the_byte_loops():
  # The NumPy lanes (long inputs, when google_crc32c is not there) against
  # the byte-at-a-time loop, at lengths around the lanes' thresholds, and
  # extended in two parts.
  rng = np.random.RandomState(0)
  for length in (4095, 4096, 4097, 8191, 65536 + 3, 300001):
    data = rng.randint(0, 256, length).astype(np.uint8).tobytes()
    expected = tf_format._register_after(0xFFFFFFFF, data) ^ 0xFFFFFFFF
    lanes = tf_format._register_after_lanes(0xFFFFFFFF, memoryview(data))
    assert lanes ^ 0xFFFFFFFF == expected, length
    assert tf_format.crc32c(data) == expected, length
    cut = length // 3
    assert tf_format.crc32c(data[cut:], tf_format.crc32c(data[:cut])) == (
        expected)


def test_mask_is_a_rotation_plus_tensorflows_constant():
  assert tf_format.mask_crc32c(0) == 0xa282ead8
  assert tf_format.mask_crc32c(1 << 15) == (1 + 0xa282ead8)
  assert tf_format.mask_crc32c(0xFFFFFFFF) == (0xFFFFFFFF + 0xa282ead8) % 2**32


# Checkpoints read as TensorFlow reads them.


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
def test_stock_cli_checkpoints_read_as_tensorflow(trained_models, model):
  model_dir, result = trained_models[model]
  assert result.returncode == 0, result.stderr[-3000:]
  latest = tf_format.latest_checkpoint(model_dir)
  assert latest == tf.train.latest_checkpoint(model_dir)
  assert latest.endswith("model.ckpt-%d" % conftest.TRAIN_STEPS)
  prefixes = sorted(p[:-len(".index")]
                    for p in glob.glob(os.path.join(model_dir, "*.index")))
  assert len(prefixes) == 2  # step 0 and the last
  for prefix in prefixes:
    reader = tf_format.CheckpointReader(prefix)
    assert reader.num_shards == 2
    dtypes = assert_reads_as_tensorflow(prefix)
    assert dtypes["global_step"] == "int64"
    assert dtypes["shared/embedding"] == "bfloat16"
    assert {"bfloat16", "float32", "int64"} == set(dtypes.values())
    assert len(dtypes) > 90


@pytest.mark.parametrize("name", KEPT)
def test_kept_reference_checkpoints_read_as_tensorflow(name):
  case = mesh_reference.BY_NAME[name]
  model_dir = os.path.join(KEPT_ROOT, name)
  latest = tf_format.latest_checkpoint(model_dir)
  assert latest == tf.train.latest_checkpoint(model_dir)
  assert tf_format.CheckpointReader(latest).num_shards == 2
  dtypes = assert_reads_as_tensorflow(latest)
  assert dtypes["global_step"] == "int64"
  weights = {d for n, d in dtypes.items()
             if "_slot_" not in n and n != "global_step"}
  assert weights == {case.variables}


@pytest.mark.parametrize("sharded", [True, False])
def test_saver_checkpoints_read_as_tensorflow(tmp_path, sharded):
  prefix = str(tmp_path / "model.ckpt")
  saved = _save_with_saver(prefix, sharded)
  reader = tf_format.load_checkpoint(str(tmp_path))
  assert reader.prefix == tf.train.latest_checkpoint(str(tmp_path))
  assert reader.num_shards == (2 if sharded else 1)
  dtypes = assert_reads_as_tensorflow(reader.prefix)
  assert set(dtypes.values()) == {"float32", "bfloat16", "int64", "string"}
  assert sorted(dtypes) == sorted(saved)
  for name, value in saved.items():
    assert _same(reader.read(name), np.asarray(value)), name


def _data_blocks(index_path: str) -> int:
  """How many data blocks a checkpoint's index has (its index block's
  entries)."""
  with open(index_path, "rb") as f:
    data = f.read()
  pos, handle = len(data) - tf_format.FOOTER_SIZE, []
  for _ in range(4):
    value, pos = tf_format._varint(data, pos, len(data), "")
    handle.append(value)
  index_block = tf_format._block(data, handle[2:], "")
  return len(tf_format._block_entries(index_block, ""))


def test_an_index_of_several_data_blocks_reads_as_tensorflow(tmp_path):
  # TensorFlow starts a new data block of the index past 256 KiB: long
  # names (little shared with the name before) make a few of them.
  names = ["%04d/%s" % (i, "decoder/block_%03d/layer_002/DenseReluDense/wi_"
                        "%d/kernel_slot_vc/" % (i % 24, i % 2) * 4)
           for i in range(1500)]
  prefix = str(tmp_path / "many")

  def tensors():
    values = tf.unstack(tf.range(len(names), dtype=tf.float32))
    return dict(zip(names, values))

  _save_v2(prefix, tensors)
  assert _data_blocks(prefix + ".index") >= 2
  assert len(assert_reads_as_tensorflow(prefix)) == len(names)


# Every dtype TensorFlow saves (SaveV2, the op a Saver runs) that the
# reader reads, a scalar and an empty tensor among them.
_RNG = np.random.RandomState(5)
DTYPE_VALUES = {
    "float32": _RNG.randn(3, 4).astype(np.float32),
    "float64": _RNG.randn(5).astype(np.float64),
    "float16": _RNG.randn(2, 2).astype(np.float16),
    "bfloat16": _RNG.randn(7, 3).astype(ml_dtypes.bfloat16),
    "float8_e5m2": _RNG.randn(4).astype(ml_dtypes.float8_e5m2),
    "float8_e4m3fn": _RNG.randn(4).astype(ml_dtypes.float8_e4m3fn),
    "int8": _RNG.randint(-128, 128, 9).astype(np.int8),
    "uint8": _RNG.randint(0, 256, 9).astype(np.uint8),
    "int16": _RNG.randint(-999, 999, 9).astype(np.int16),
    "uint16": _RNG.randint(0, 999, 9).astype(np.uint16),
    "int32": _RNG.randint(-999, 999, (3, 3)).astype(np.int32),
    "uint32": _RNG.randint(0, 999, 9).astype(np.uint32),
    "int64": _RNG.randint(-999, 999, (2, 3)).astype(np.int64),
    "uint64": _RNG.randint(0, 999, 9).astype(np.uint64),
    "bool": _RNG.rand(6) > 0.5,
    "complex64": (_RNG.randn(3) + 1j * _RNG.randn(3)).astype(np.complex64),
    "complex128": (_RNG.randn(3) + 1j * _RNG.randn(3)).astype(np.complex128),
    "string": np.array([b"abc", b"", b"x" * 300, b"\xc3\xa9"],
                       dtype=object).reshape(2, 2),
    "scalar": np.float32(3.5),
    "empty": np.zeros((0, 3), np.float32),
}


def test_every_dtype_reads_as_tensorflow(tmp_path):
  prefix = str(tmp_path / "dtypes")
  _save_v2(prefix, lambda: {
      n: tf.constant(v, dtype=tf_dtypes.as_dtype(
          "float32" if n in ("scalar", "empty") else n))
      for n, v in DTYPE_VALUES.items()})
  dtypes = assert_reads_as_tensorflow(prefix)
  expected = {n: ("float32" if n in ("scalar", "empty") else n)
              for n in DTYPE_VALUES}
  assert dtypes == expected
  reader = tf_format.CheckpointReader(prefix)
  assert reader.shape("scalar") == () and reader.shape("empty") == (0, 3)


def test_a_dtype_the_reader_does_not_know_is_refused_by_name(tmp_path):
  prefix = str(tmp_path / "int4")
  _save_v2(prefix, lambda: {
      "small/weights": tf.cast(tf.constant([1, 2, 3]), tf_dtypes.int4),
      "ok": tf.constant([1.5])})
  reader = tf_format.CheckpointReader(prefix)
  assert reader.dtype_name("small/weights") == "DT_INT4"
  with pytest.raises(CheckpointError,
                     match=r"small/weights is of dtype DT_INT4, which this "
                     r"reader does not read"):
    reader.read("small/weights")
  with pytest.raises(CheckpointError, match="small/weights"):
    reader.read_many()
  np.testing.assert_array_equal(reader.read("ok"), [1.5])


def test_a_partitioned_variable_is_refused_by_name(tmp_path):
  graph = tf.Graph()
  with graph.as_default():
    tf.get_variable("parted", shape=[10, 4],
                    partitioner=tf.fixed_size_partitioner(2))
    with tf.Session(graph=graph) as session:
      session.run(tf.global_variables_initializer())
      tf.train.Saver().save(session, str(tmp_path / "model.ckpt"))
  reader = tf_format.load_checkpoint(str(tmp_path))
  # TensorFlow lists the whole variable, not its slices: so does the reader.
  assert reader.variable_names() == sorted(
      tf.train.load_checkpoint(reader.prefix).get_variable_to_shape_map())
  assert reader.shape("parted") == (10, 4)
  with pytest.raises(CheckpointError, match="parted was saved in slices"):
    reader.read("parted")


# Without TensorFlow: docs/export.md's block, in a process that cannot
# import TensorFlow (or mesh, t5, torch, jax).

DOC = "docs/export.md"
DOC_MARKER = "tf_format.load_checkpoint("
DOC_MODEL_DIR = '"/tmp/syn"'
NO_FRAMEWORKS = """
import sys
BLOCKED = {"tensorflow", "tensorflow_io_gcs_filesystem", "mesh_tensorflow",
           "t5", "seqio", "torch", "jax", "flax"}
class Block:
  def find_spec(self, name, path=None, target=None):
    if name.split(".")[0] in BLOCKED:
      raise ImportError("the reader needs " + name)
sys.meta_path.insert(0, Block())
"""
DIGESTS = """
import hashlib, json
print("RESULT " + json.dumps({
    "prefix": reader.prefix,
    "digests": {n: [str(v.dtype), list(v.shape),
                    hashlib.sha256(v.tobytes()).hexdigest()]
                for n, v in weights.items()},
    "modules": sorted({m.split(".")[0] for m in sys.modules} & BLOCKED)}))
"""


def _tensorflow_digests(prefix: str):
  reference = tf.train.load_checkpoint(prefix)
  out = {}
  for name in reference.get_variable_to_shape_map():
    value = np.asarray(reference.get_tensor(name))
    out[name] = [str(value.dtype), list(value.shape),
                 hashlib.sha256(value.tobytes()).hexdigest()]
  return out


@pytest.mark.slow
def test_the_documents_block_reads_a_stock_cli_checkpoint_without_tensorflow(
    trained_models, tmp_path):
  import doc_blocks  # pylint: disable=g-import-not-at-top
  model_dir, _ = trained_models["random_vanilla"]
  block = doc_blocks.find_block(DOC, "python", DOC_MARKER)
  assert DOC_MODEL_DIR in block.text
  script = tmp_path / "read_checkpoint.py"
  script.write_text(NO_FRAMEWORKS + doc_blocks.substitute_text(
      block.text, {DOC_MODEL_DIR: repr(model_dir)}) + DIGESTS)
  proc = subprocess.run([sys.executable, str(script)], cwd=conftest.REPO,
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  lines = proc.stdout.splitlines()
  (result,) = [json.loads(l[len("RESULT "):]) for l in lines
               if l.startswith("RESULT ")]
  assert result["modules"] == []
  assert result["prefix"] == tf.train.latest_checkpoint(model_dir)
  expected = _tensorflow_digests(result["prefix"])
  assert result["digests"] == expected
  # The block's own lines: one per variable, then the embedding's dtype.
  assert len([l for l in lines if l.split(" ")[0] in expected]) == len(
      expected)
  assert "bfloat16" in lines


# A URL through fsspec.


def test_a_url_is_read_through_fsspec(saver_checkpoint):
  fsspec = pytest.importorskip("fsspec")
  memory = fsspec.filesystem("memory")
  directory = os.path.dirname(saver_checkpoint)
  for path in glob.glob(os.path.join(directory, "*")):
    with open(path, "rb") as f:
      memory.pipe("/reader_test/" + os.path.basename(path), f.read())
  try:
    reader = tf_format.load_checkpoint("memory://reader_test")
    assert reader.prefix == "memory://reader_test/model.ckpt"
    local = tf_format.CheckpointReader(saver_checkpoint)
    assert reader.variable_names() == local.variable_names()
    for name, value in local.read_many().items():
      assert _same(reader.read(name), value), name
  finally:
    memory.rm("/reader_test", recursive=True)


def test_gs_without_gcsfs_says_what_to_install(monkeypatch):
  pytest.importorskip("fsspec")
  monkeypatch.setitem(sys.modules, "gcsfs", None)  # not importable
  with pytest.raises(ImportError, match="pip install gcsfs"):
    tf_format.load_checkpoint("gs://some-bucket/model_dir")


# Bad input: one clear error, nothing returned in part.


def test_a_directory_without_a_checkpoint(tmp_path):
  with pytest.raises(CheckpointError,
                     match="no checkpoint in .*: it has no 'checkpoint' file"):
    tf_format.load_checkpoint(str(tmp_path))
  with pytest.raises(CheckpointError, match="no such directory"):
    tf_format.latest_checkpoint(str(tmp_path / "absent"))
  with pytest.raises(CheckpointError, match=r"absent\.index not found"):
    tf_format.CheckpointReader(str(tmp_path / "absent"))


def test_a_directory_without_its_state_file_names_the_checkpoints_it_holds(
    saver_checkpoint, tmp_path):
  prefix = _copy(saver_checkpoint, tmp_path / "copy")
  os.remove(os.path.join(os.path.dirname(prefix), "checkpoint"))
  with pytest.raises(CheckpointError, match=r"it holds model\.ckpt\.index"):
    tf_format.load_checkpoint(os.path.dirname(prefix))


def test_a_state_file_naming_a_missing_checkpoint(saver_checkpoint, tmp_path):
  prefix = _copy(saver_checkpoint, tmp_path / "copy")
  os.remove(prefix + ".index")
  with pytest.raises(CheckpointError,
                     match=r"names the checkpoint .*model\.ckpt, whose "
                     r".*model\.ckpt\.index is not there"):
    tf_format.load_checkpoint(os.path.dirname(prefix))


def test_a_missing_shard(saver_checkpoint, tmp_path):
  prefix = _copy(saver_checkpoint, tmp_path / "copy")
  os.remove(tf_format.data_file(prefix, 1, 2))
  with pytest.raises(CheckpointError, match=r"data shard .*"
                     r"model\.ckpt\.data-00001-of-00002 is missing"):
    tf_format.CheckpointReader(prefix)


def test_a_cut_shard(saver_checkpoint, tmp_path):
  prefix = _copy(saver_checkpoint, tmp_path / "copy")
  shard = tf_format.data_file(prefix, 1, 2)
  size = os.path.getsize(shard)
  with open(shard, "r+b") as f:
    f.truncate(size - 1)
  with pytest.raises(CheckpointError,
                     match=r"data-00001-of-00002 is cut short: %d bytes, and "
                     r"\S+ ends at byte %d" % (size - 1, size)):
    tf_format.CheckpointReader(prefix)


def _stock_cli_or_saver(request, tmp_path) -> str:
  """A copy of the checkpoint a test is parametrized with; its prefix."""
  if request.param == "saver":
    source = request.getfixturevalue("saver_checkpoint")
  elif request.param in mesh_reference.BY_NAME:
    source = tf_format.latest_checkpoint(os.path.join(KEPT_ROOT,
                                                      request.param))
  else:
    model_dir, _ = request.getfixturevalue("trained_models")[request.param]
    source = tf_format.latest_checkpoint(model_dir)
  return _copy(source, tmp_path / "copy")


@pytest.fixture(params=["saver", pytest.param("random_vanilla",
                                              marks=pytest.mark.slow),
                        "t5.1.0-encdec-dense-bfloat16",
                        "t5.1.0-encdec-random_vanilla-model2"])
def checkpoint_copy(request, tmp_path) -> str:
  return _stock_cli_or_saver(request, tmp_path)


def test_a_changed_byte_in_a_shard_fails_its_variables_checksum(
    checkpoint_copy):
  reader = tf_format.CheckpointReader(checkpoint_copy)
  good = reader.read_many()
  names = [n for n in reader.variable_names() if reader.entry(n).size >= 8]
  for name in (names[0], names[len(names) // 2], names[-1]):
    entry = reader.entry(name)
    path = tf_format.data_file(checkpoint_copy, entry.shard,
                               reader.num_shards)
    for position in (entry.offset, entry.offset + entry.size - 1):
      _flip(path, position)
      with pytest.raises(CheckpointError,
                         match=r"the checksum of %s \(bytes %d to %d of "
                         r".*\) does not match" % (
                             name, entry.offset, entry.offset + entry.size)):
        reader.read(name)
      with pytest.raises(CheckpointError, match="checksum of " + name):
        reader.read_many()
      _flip(path, position)  # back
  for name, value in reader.read_many().items():
    assert _same(value, good[name]), name


def test_a_changed_byte_in_the_index_is_caught(checkpoint_copy):
  index = checkpoint_copy + ".index"
  with open(index, "rb") as f:
    original = f.read()
  footer = len(original) - tf_format.FOOTER_SIZE
  # The footer holds two block handles, then padding up to the magic
  # number: no checksum covers the padding, which no reader reads.
  handles_end = footer
  for _ in range(4):
    _, handles_end = tf_format._varint(original, handles_end, len(original),
                                       "")
  positions = sorted(set(range(0, footer, 7)) |
                     set(range(footer - 12, handles_end)) |
                     set(range(len(original) - 8, len(original))))
  caught = 0
  for position in positions:
    _flip(index, position)
    with pytest.raises(CheckpointError) as error:
      tf_format.CheckpointReader(checkpoint_copy)
    message = str(error.value)
    assert index in message, message
    assert ("checksum of the block" in message or
            "magic number" in message or "runs past" in message), message
    caught += 1
    _flip(index, position)
  assert caught == len(positions) > 100
  tf_format.CheckpointReader(checkpoint_copy)  # the file is whole again


def test_an_index_cut_short(saver_checkpoint, tmp_path):
  prefix = _copy(saver_checkpoint, tmp_path / "copy")
  with open(prefix + ".index", "r+b") as f:
    f.truncate(os.path.getsize(prefix + ".index") - 3)
  with pytest.raises(CheckpointError, match="magic number"):
    tf_format.CheckpointReader(prefix)
  with open(prefix + ".index", "r+b") as f:
    f.truncate(20)
  with pytest.raises(CheckpointError, match="shorter than a table's footer"):
    tf_format.CheckpointReader(prefix)


def test_an_unknown_variable_is_named_with_the_closest(saver_checkpoint):
  reader = tf_format.CheckpointReader(saver_checkpoint)
  with pytest.raises(CheckpointError,
                     match=r"has no variable 'block_001/kernal' \(it has 163;"
                     r" closest: block_001/kernel"):
    reader.read("block_001/kernal")
  for method in (reader.shape, reader.dtype, reader.entry):
    with pytest.raises(CheckpointError, match="no variable 'nothing'"):
      method("nothing")
  with pytest.raises(CheckpointError, match="no variable 'nothing'"):
    reader.read_many(["large", "nothing"])
  assert "large" in reader and "nothing" not in reader


def test_read_many_returns_nothing_when_one_fails(checkpoint_copy):
  reader = tf_format.CheckpointReader(checkpoint_copy)
  names = reader.variable_names()
  last = reader.entry(names[-1])
  _flip(tf_format.data_file(checkpoint_copy, last.shard, reader.num_shards),
        last.offset)
  with pytest.raises(CheckpointError, match="checksum of " + names[-1]):
    reader.read_many()
  # The others read, one by one.
  for name in names[:-1]:
    reader.read(name)

