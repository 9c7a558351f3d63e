# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""mtf-synthesizer-flax-from-mesh: a mesh model directory into orbax.

On the checkpoints the stock CLI wrote (tests/data/mesh_reference/): a
released T5.1.1 layout (mesh's own SelfAttention) into a Synthesizer
variant restores every T5 weight and draws the Synthesizer's own, as
`init_from_t5` does on the mesh side; a converted directory restores to the
same model and parameters; every bad input is one line and exit status 2,
with nothing written.
"""

import json
import os
import shutil
import subprocess
import sys

import gin
import numpy as np
import pytest

from mtf_synthesizer.checkpoints import flax_names
from mtf_synthesizer.checkpoints import tf_format
from mtf_synthesizer.commands import flax_from_mesh
from mtf_synthesizer.flax_model import checkpointing
from mtf_synthesizer.flax_model import mesh_checkpoint
from mtf_synthesizer.flax_model import t5

ROOT = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data",
                    "mesh_reference")
RELEASED = os.path.join(ROOT, "t5.1.1-encdec-t5_attention")
RANDOM = os.path.join(ROOT, "t5.1.0-encdec-random")
# The kept cases' sizes, as --gin bindings.
TINY = ["--gin.T5Config.vocab_size=384", "--gin.T5Config.d_model=8",
        "--gin.T5Config.num_heads=2", "--gin.T5Config.head_dim=4",
        "--gin.T5Config.d_ff=16", "--gin.T5Config.num_encoder_layers=1",
        "--gin.T5Config.num_decoder_layers=1", "--gin.T5Config.max_length=8"]
T5_1_1_DV = ["--gin_file=flax/t5_1_1.gin", "--gin_file=flax/dense_vanilla.gin"]


def convert(argv, capsys):
  """Runs the command's main in this process: (status, stdout, stderr)."""
  try:
    status = flax_from_mesh.main(argv)
  finally:
    gin.clear_config()
  out, err = capsys.readouterr()
  return status, out, err


def test_released_t5_into_a_variant(tmp_path, capsys):
  out_dir = str(tmp_path / "dv")
  status, out, _ = convert(["--model_dir=" + RELEASED, "--output_dir=" +
                            out_dir] + T5_1_1_DV + TINY, capsys)
  assert status == 0
  summary = json.loads(out)
  assert summary["unused"] == []
  assert summary["fresh"] and all(
      flax_names.is_synthesizer_own(p) for p in summary["fresh"])
  model, params = checkpointing.restore(out_dir)
  assert isinstance(model, t5.EncoderDecoder)
  assert model.config.variant == "dense_vanilla"
  source = json.load(open(os.path.join(out_dir, checkpointing.SOURCE)))
  reader = tf_format.load_checkpoint(RELEASED)
  mapped = flax_names.flax_params(
      reader, mesh_checkpoint.expected_shapes(model))
  flat = {"/".join(k): v for k, v in _flatten(params)}
  # Every T5 weight restored, bytes as the checkpoint holds them.
  assert sorted(source["restored"]) == sorted(mapped.restored)
  for path, value in mapped.restored.items():
    np.testing.assert_array_equal(np.asarray(flat[path]), value, path)
  # The Synthesizer's own drawn by the model's initializers (seed 0).
  drawn = dict(_flatten(mesh_checkpoint.init_params(model)))
  for path in source["fresh"]:
    np.testing.assert_array_equal(flat[path], drawn[tuple(path.split("/"))])


def _flatten(tree, prefix=()):
  for key, value in tree.items():
    if isinstance(value, dict):
      yield from _flatten(value, prefix + (key,))
    else:
      yield prefix + (key,), value


def test_a_converted_model_gives_meshs_logits(tmp_path, capsys):
  out_dir = str(tmp_path / "r")
  status, _, _ = convert(["--model_dir=" + RANDOM, "--output_dir=" + out_dir,
                          "--gin_file=flax/t5_1_0.gin",
                          "--gin_file=flax/random.gin",
                          "--gin.T5Config.dropout_rate=0.0"] + TINY, capsys)
  assert status == 0
  model, params = checkpointing.restore(out_dir)
  arrays = np.load(os.path.join(RANDOM, "reference.npz"))
  logits = np.asarray(model.apply({"params": params}, arrays["inputs"],
                                  arrays["decoder_inputs"],
                                  enable_dropout=False))
  counted = np.broadcast_to((arrays["targets"] > 0)[..., None], logits.shape)
  np.testing.assert_allclose(logits[counted], arrays["logits"][counted],
                             rtol=1e-5, atol=1e-5 * np.abs(
                                 arrays["logits"]).max())


def _damaged(tmp_path, how):
  """A copy of the R case whose data shard is truncated or has a byte off."""
  copy = tmp_path / "damaged"
  shutil.copytree(RANDOM, copy)
  shard = sorted(p for p in copy.iterdir() if ".data-" in p.name and
                 p.stat().st_size > 0)[-1]
  data = bytearray(shard.read_bytes())
  if how == "truncated":
    data = data[:len(data) // 2]
  else:
    data[len(data) // 2] ^= 0x40
  shard.write_bytes(bytes(data))
  return str(copy)


BAD_INPUTS = {
    "no checkpoint": (lambda tmp: str(tmp), ["--gin_file=flax/random.gin"],
                      "no checkpoint"),
    "truncated": (lambda tmp: _damaged(tmp, "truncated"),
                  ["--gin_file=flax/random.gin"], "damaged"),
    "corrupted": (lambda tmp: _damaged(tmp, "corrupted"),
                  ["--gin_file=flax/random.gin"], "checksum"),
    "another variant": (lambda tmp: RANDOM, ["--gin_file=flax/dense.gin"],
                        "random/R"),
    "another width": (lambda tmp: RANDOM, ["--gin_file=flax/random.gin",
                                           "--gin.T5Config.d_ff=32"],
                      "mlp/wi/kernel"),
    "unknown variant": (lambda tmp: RANDOM,
                        ["--gin.T5Config.variant='randm'"], "randm"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_and_writes_nothing(name, tmp_path, capsys):
  make_dir, flags, said = BAD_INPUTS[name]
  (tmp_path / "in").mkdir()
  model_dir = make_dir(tmp_path / "in")
  out_dir = tmp_path / "out"
  status, out, err = convert(
      ["--model_dir=" + model_dir, "--output_dir=" + str(out_dir),
       "--gin_file=flax/t5_1_0.gin"] + TINY + flags, capsys)
  assert status == 2, (out, err)
  # One error: its message (a mapping error lists every variable that does
  # not fit, a line each), after the line that names what is read.
  lines = [l for l in err.splitlines() if not l.endswith(model_dir)]
  assert lines[0].startswith(flax_from_mesh.PROGRAM + ": "), err
  assert said in err and "Traceback" not in err, err
  assert sum(l.startswith(flax_from_mesh.PROGRAM) for l in lines) == 1, err
  assert not out_dir.exists()
  assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]


def test_an_output_dir_with_files_is_refused(tmp_path, capsys):
  (tmp_path / "out").mkdir()
  (tmp_path / "out" / "notes.txt").write_text("mine")
  status, _, err = convert(["--model_dir=" + RANDOM, "--output_dir=" + str(
      tmp_path / "out"), "--gin_file=flax/t5_1_0.gin",
                            "--gin_file=flax/random.gin"] + TINY, capsys)
  assert status == 2 and "--overwrite" in err
  assert os.listdir(tmp_path / "out") == ["notes.txt"]


def test_a_bucket_as_output_is_refused(capsys):
  status, _, err = convert(["--model_dir=" + RANDOM,
                            "--output_dir=gs://bucket/flax",
                            "--gin_file=flax/random.gin"] + TINY, capsys)
  assert status == 2 and "write a local directory" in err


def test_an_unmapped_variable_is_named():
  reader = tf_format.load_checkpoint(RELEASED)
  arrays = {n: reader.read(n) for n in reader.variable_names()}
  extra = "encoder/block_000/layer_000/SelfAttention/gate"
  arrays[extra] = np.zeros((8, 8), np.float32)
  model = t5.make_model(config=t5.T5Config(
      vocab_size=384, d_model=8, num_heads=2, head_dim=4, d_ff=16,
      num_encoder_layers=1, num_decoder_layers=1, max_length=8,
      activations=("gelu", "linear"), logits_via_embedding=False,
      variant="dense_vanilla"))
  with pytest.raises(flax_names.MappingError, match=extra):
    flax_names.flax_params(arrays, mesh_checkpoint.expected_shapes(model))


def test_the_command_runs_as_a_module(tmp_path):
  """`python -m` (the installed command's main): exit status 2 on stderr."""
  result = subprocess.run(
      [sys.executable, "-m", "mtf_synthesizer.commands.flax_from_mesh",
       "--model_dir=" + str(tmp_path), "--output_dir=" + str(tmp_path / "o"),
       "--gin_file=flax/random.gin"], capture_output=True, text=True,
      check=False, cwd=os.path.dirname(os.path.dirname(ROOT)) + "/..")
  assert result.returncode == 2, result.stderr
  assert "no checkpoint" in result.stderr
  assert "tensorflow" not in result.stderr.lower()
