# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""A broken weights file is named before it is loaded.

(mtf_synthesizer/hf_tools/weight_files.py)

Files written by safetensors are cut or spoiled in the ways a copy or a
download goes wrong; safetensors' own reader (the reference) refuses each,
and `files.check_safetensors` must refuse each too, naming the file, and
pass the whole one. `mtf-synthesizer-from-t5` on a T5 directory with such
a file, or on a directory that does not exist, exits with status 2 and
names it.
"""

import json
import os

import huggingface_hub
import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

from mtf_synthesizer.commands import from_t5 as from_t5_command
from mtf_synthesizer.hf_tools import weight_files as files
import test_from_t5


def _cut(raw: bytes, header_length: int):
  """name -> bytes of a spoiled copy of a safetensors file's bytes."""
  data_start = 8 + header_length
  garbage_header = bytearray(raw)
  garbage_header[8:12] = b"\xff\xfe{["
  return {
      "empty": b"",
      "in_the_length": raw[:5],
      "in_the_header": raw[:8 + header_length // 2],
      "no_data": raw[:data_start],
      "half_the_data": raw[:data_start + (len(raw) - data_start) // 2],
      "one_byte_short": raw[:-1],
      "one_byte_more": raw + b"\0",
      "a_huge_header_length": (2**40).to_bytes(8, "little") + raw[8:],
      "a_spoiled_header": bytes(garbage_header),
      "not_safetensors": b"PK\x03\x04" + b"\0" * 200,
  }


@pytest.fixture(scope="module")
def whole_file(tmp_path_factory):
  """A safetensors file of a few dtypes and shapes, and its bytes."""
  path = tmp_path_factory.mktemp("whole") / "model.safetensors"
  rng = np.random.RandomState(0)
  save_file({"a.weight": rng.randn(3, 4).astype(np.float32),
             "b.bias": rng.randn(5).astype(np.float16),
             "c.ids": np.arange(7, dtype=np.int64),
             "d.scalar": np.array(2.0, np.float64)}, str(path),
            metadata={"format": "pt"})
  return path, path.read_bytes()


def test_a_whole_file_passes(whole_file):
  path, _ = whole_file
  files.check_safetensors(str(path))
  files.check_weights(str(path.parent))


@pytest.mark.parametrize("how", sorted(_cut(b"\0" * 64, 16)))
def test_a_broken_file_is_refused_by_name(whole_file, tmp_path, how):
  _, raw = whole_file
  header_length = int.from_bytes(raw[:8], "little")
  path = tmp_path / "model.safetensors"
  path.write_bytes(_cut(raw, header_length)[how])
  # The reference: safetensors refuses it, without naming it.
  with pytest.raises(Exception) as reference:
    with safe_open(str(path), "np") as f:
      for key in f.keys():
        f.get_tensor(key)
  assert str(path) not in str(reference.value)
  with pytest.raises(files.WeightsFileError) as refused:
    files.check_weights(str(tmp_path))
  assert str(path) in str(refused.value)


def test_a_missing_shard_is_named(whole_file, tmp_path):
  _, raw = whole_file
  (tmp_path / "model-00001-of-00002.safetensors").write_bytes(raw)
  (tmp_path / "model.safetensors.index.json").write_text(json.dumps({
      "metadata": {}, "weight_map": {
          "a.weight": "model-00001-of-00002.safetensors",
          "e.weight": "model-00002-of-00002.safetensors"}}))
  with pytest.raises(files.WeightsFileError,
                     match="model-00002-of-00002.safetensors"):
    files.check_weights(str(tmp_path))


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory):
  path = tmp_path_factory.mktemp("t5") / "t5"
  test_from_t5._t5("t5.1.1").save_pretrained(path)
  return path


def _from_t5(t5, out):
  return from_t5_command.main(["--t5", str(t5), "--variant", "V",
                               "--output_dir", str(out),
                               "--synthesizer_max_length", "16"])


@pytest.mark.parametrize("how", ["half_the_data", "a_spoiled_header"])
def test_from_t5_names_a_broken_weights_file(t5_dir, tmp_path, capsys, how):
  broken = tmp_path / "t5"
  broken.mkdir()
  for name in os.listdir(t5_dir):
    (broken / name).write_bytes((t5_dir / name).read_bytes())
  weights = broken / "model.safetensors"
  raw = weights.read_bytes()
  weights.write_bytes(_cut(raw, int.from_bytes(raw[:8], "little"))[how])
  assert _from_t5(broken, tmp_path / "out") == 2
  error = capsys.readouterr().err
  assert str(weights) in error, error
  assert not (tmp_path / "out").exists()


def test_from_t5_names_a_missing_directory(tmp_path, capsys):
  missing = tmp_path / "no_such_t5"
  assert _from_t5(missing, tmp_path / "out") == 2
  error = capsys.readouterr().err
  assert str(missing) in error and "Repo id" not in error, error
  assert not (tmp_path / "out").exists()


def test_from_t5_names_both_readings_of_an_unreachable_name(
    tmp_path, capsys, monkeypatch):
  """A name that is no directory and no Hub model that loads (offline)."""
  monkeypatch.chdir(tmp_path)
  monkeypatch.setenv("HF_HUB_OFFLINE", "1")
  monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
  assert _from_t5("someone/no-such-t5", tmp_path / "out") == 2
  error = capsys.readouterr().err
  assert error.count("\n") == 1, error  # one line
  assert "neither a T5 checkpoint directory" in error, error
  assert str(tmp_path / "someone" / "no-such-t5") in error, error
  assert "Hub model" in error, error


@pytest.mark.parametrize("options", [
    ["--synthesizer_max_length", "0"],
    ["--synthesizer_max_length", "17", "--variant", "FD"]])
def test_from_t5_names_a_refused_option_in_one_line(t5_dir, tmp_path, capsys,
                                                    options):
  argv = ["--t5", str(t5_dir), "--variant", "V", "--output_dir",
          str(tmp_path / "out")] + options
  assert from_t5_command.main(argv) == 2
  error = capsys.readouterr().err
  last = error.strip().splitlines()[-1]  # after transformers' progress
  assert last.startswith("error: ") and "Traceback" not in error, error
  assert "synthesizer_max_length" in last, error
  assert not (tmp_path / "out").exists()


def test_from_t5_reads_the_whole_t5(t5_dir, tmp_path, capsys):
  """The control: the unbroken directory converts."""
  assert _from_t5(t5_dir, tmp_path / "out") == 0
  capsys.readouterr()
