# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The release checkpoint converter, on a checkpoint file, and its command."""

import numpy as np

from mtf_synthesizer.checkpoints import release_checkpoint as tool
from mtf_synthesizer.commands import convert_release_checkpoint as command


def test_converts_a_release_checkpoint_file(tmp_path):
  rng = np.random.RandomState(0)
  scope = "decoder/block_000/layer_000/"
  release_values = {
      scope + "Synthesizer/R": rng.randn(6, 2, 6).astype(np.float32),
      scope + "Synthesizer/R_slot_v": rng.randn(6, 2, 6).astype(np.float32),
      scope + "Synthesizer/q": rng.randn(4, 8).astype(np.float32),
      scope + "Synthesizer/alpha": np.array([0.3], np.float32),
      "global_step": np.array(7, np.int64),
  }
  src = tool.write_checkpoint(release_values, str(tmp_path / "in" / "m"))
  out = tool.convert(src, str(tmp_path / "out" / "m"), num_heads=2)
  got = tool.read_checkpoint(out)
  assert sorted(got) == sorted([
      scope + "SynthesizerAttention/random/R",
      scope + "SynthesizerAttention/q",
      scope + "SynthesizerAttention/mixture/alpha_logits", "global_step"])
  r = release_values[scope + "Synthesizer/R"]
  # R[i, h, j] of the release is R[h, i, j] here.
  np.testing.assert_array_equal(got[scope + "SynthesizerAttention/random/R"][
      1, 4, 2], r[4, 1, 2])
  np.testing.assert_array_equal(
      got[scope + "SynthesizerAttention/mixture/alpha_logits"],
      np.array([[0.0, 0.0], [0.3, 0.3]], np.float32))
  assert got["global_step"] == 7


def test_the_command_converts_and_refuses_factorized(tmp_path, capsys):
  scope = "encoder/block_000/layer_000/Synthesizer/"
  src = tool.write_checkpoint(
      {scope + "R": np.zeros([4, 2, 4], np.float32),
       "global_step": np.array(1, np.int64)}, str(tmp_path / "in" / "m"))
  out = str(tmp_path / "out" / "m")
  assert command.main(["--input", src, "--output=" + out,
                       "--num_heads=2"]) == 0
  assert sorted(tool.read_checkpoint(out)) == [
      "encoder/block_000/layer_000/SynthesizerAttention/random/R",
      "global_step"]
  broken = tool.write_checkpoint({scope + "R1": np.zeros([4, 2], np.float32)},
                                 str(tmp_path / "factorized" / "m"))
  assert command.main(["--input", broken, "--output", out + "2",
                       "--num_heads", "2"]) == 2
  assert "broken 'factorized' mode" in capsys.readouterr().err


def test_a_missing_input_is_named(tmp_path, capsys):
  """No checkpoint at --input (a prefix, an empty directory): status 2 and
  its path, no TensorFlow traceback."""
  empty = tmp_path / "empty"
  empty.mkdir()
  for missing in (str(tmp_path / "nowhere" / "model.ckpt-5"), str(empty)):
    assert command.main(["--input", missing, "--output",
                         str(tmp_path / "out" / "m"), "--num_heads=2"]) == 2
    error = capsys.readouterr().err
    assert missing in error, error
  assert not (tmp_path / "out").exists()


def test_a_cut_input_is_named(tmp_path, capsys):
  src = tool.write_checkpoint(
      {"encoder/block_000/layer_000/Synthesizer/R":
           np.ones([64, 2, 64], np.float32)}, str(tmp_path / "in" / "m"))
  (data,) = (tmp_path / "in").glob("m.data-*")
  data.write_bytes(data.read_bytes()[:100])
  assert command.main(["--input", src, "--output",
                       str(tmp_path / "out" / "m"), "--num_heads=2"]) == 2
  assert src in capsys.readouterr().err
