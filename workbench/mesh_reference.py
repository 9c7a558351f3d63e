# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Mesh's values on tiny checkpoints of the stock CLI: the other models' target.

Each case (`CASES`) is a tiny model the stock `t5_mesh_transformer` trains
for TRAIN_STEPS steps on the byte vocabulary: every variant of the attention
table (`attentions.VARIANTS`) as an encoder-decoder in T5.1.0's layout
(t5's `models/bi_v1.gin`: ReLU, one embedding shared by both stacks and the
softmax, a relative attention bias shared by the layers of a stack), a
sample of decoder-only language models, T5.1.1's layout
(`models/t5.1.1.base.gin`: gated GELU, a separate softmax kernel; with
mesh's own SelfAttention too, the layout of a released T5.1.1), one run
on a `model:2` mesh of two logical CPU devices and one with bfloat16
variables. Every other run keeps float32 variables and activations, so that
values compare at 1e-5.

From a case's kept checkpoint, `compute` rebuilds the model in this process
from the run's `operative_config.gin` (as `t5_mesh_transformer` builds it)
on one device, restores it, and computes on fixed inputs (`INPUT_TEXTS`,
`TARGET_TEXTS`, encoded by mesh's own `utils.encode_inputs`):

  * `encoder_output` [batch, length, d_model] (encoder-decoders): the
    encoder stack's output after its final norm, as the decoder reads it;
  * `logits` [batch, length, vocab]: `call_simple` in EVAL mode (the
    decoder reads `autoregressive_inputs(targets)`);
  * `loss`: the loss the CLI's evaluation computes (`call_simple` with
    `compute_loss=True` in EVAL mode): the sum over positions whose target
    is not 0 of the softmax cross entropy, without z_loss (mesh adds it
    only in training), divided by batch * length (every position, padding
    included; `Unitransformer.loss_denominator`);
  * `train_loss`: the same in TRAIN mode (the training loss, no dropout):
    z_loss (`Unitransformer.z_loss`, 1e-4) times log(Z)^2 is added per
    counted position;
  * `decodes` [batch, length]: greedy decoding as the CLI's `--mode=infer`
    runs it (mesh's model function in PREDICT mode: `Bitransformer.decode`
    with beam 1, temperature 0; a language model's
    `Unitransformer.sample_autoregressive` continuing the prompts, which are
    removed), after `utils.clean_decodes` (everything after EOS is 0).

`write_case` keeps the checkpoint (index, shards, `checkpoint`,
`operative_config.gin`), `reference.npz` (inputs and values) and
`case.json` (the case, the definitions above, sizes); `tools/
mesh_reference.py` regenerates them, and the tests recompute the values
from the kept checkpoints and compare.
"""

import concurrent.futures
import dataclasses
import json
import os
import shutil
import tempfile
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from mtf_synthesizer import attentions
from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import runner

TRAIN_STEPS = 2
LENGTH = 8  # inputs and targets; also SynthesizerAttention.max_length
LM_PROMPT = 4  # a language model's prompt; it continues to LENGTH
BATCH = 4  # sequences per training batch
DIMS = {"d_model": 8, "d_ff": 16, "num_heads": 2, "d_kv": 4,
        "num_layers": 1}
ZERO_DROPOUT = "dropout_rate = 0.0"
FLOAT32 = ["get_variable_dtype.master_dtype = 'float32'",
           "get_variable_dtype.slice_dtype = 'float32'",
           "get_variable_dtype.activation_dtype = 'float32'"]
# Variables stored and computed in bfloat16, activations float32.
BFLOAT16 = ["get_variable_dtype.master_dtype = 'bfloat16'",
            "get_variable_dtype.slice_dtype = 'float32'",
            "get_variable_dtype.activation_dtype = 'float32'"]
LAYOUT_GIN = {"t5.1.0": "models/bi_v1.gin",
              "t5.1.1": "models/t5.1.1.base.gin"}
LM_MIXTURE = "pydocs_lm"
MESH_DEVICES = 2

# Inputs (encoder-decoders) or prompts (language models) and targets for
# teacher forcing: with EOS, one row fills LENGTH, the other is padded.
INPUT_TEXTS = ("def f(x", "Hi!")
TARGET_TEXTS = ("return", "os.path")

DEFINITIONS = {
    "inputs": "encoder-decoders: byte ids [batch, length] of INPUT_TEXTS, "
              "EOS (1) appended, 0-padded (mesh's utils.encode_inputs)",
    "targets": "byte ids [batch, length] of TARGET_TEXTS, EOS appended, "
               "0-padded",
    "decoder_inputs": "what the decoder reads: "
                      "transformer.autoregressive_inputs(targets)",
    "prompts": "language models: byte ids [batch, prompt] of INPUT_TEXTS, "
               "no EOS, 0-padded, cut at the prompt length",
    "encoder_output": "the encoder stack's output after its final norm "
                      "[batch, length, d_model]",
    "logits": "call_simple in EVAL mode [batch, length, vocab], float32",
    "loss": "the CLI's evaluation loss (call_simple, compute_loss=True, "
            "EVAL mode): sum of the softmax cross entropy over positions "
            "whose target is not 0, no z_loss, divided by batch * length",
    "train_loss": "the same in TRAIN mode (no dropout): with z_loss, "
                  "z_loss * log(Z)^2 added per counted position",
    "decodes": "greedy decodes as --mode=infer makes them (beam 1, "
               "temperature 0; a language model's continuation without its "
               "prompt), after utils.clean_decodes [batch, length]",
}


@dataclasses.dataclass(frozen=True)
class Case:
  """One tiny model of the stock CLI.

  Attributes:
    variant: a name of `attentions.VARIANTS`.
    model_type: "bitransformer" (encoder-decoder) or "lm" (decoder only).
    layout: "t5.1.0" or "t5.1.1" (`LAYOUT_GIN`).
    variables: the stored and computed dtype of the variables.
    mesh_shape: `utils.run.mesh_shape` of the training run ("" one device).
  """
  variant: str
  model_type: str = "bitransformer"
  layout: str = "t5.1.0"
  variables: str = "float32"
  mesh_shape: str = ""

  @property
  def name(self) -> str:
    """The case's folder name, e.g. "t5.1.0-encdec-random"."""
    kind = "encdec" if self.model_type == "bitransformer" else "lm"
    parts = [self.layout, kind, self.variant]
    if self.variables != "float32":
      parts.append(self.variables)
    if self.mesh_shape:
      parts.append(self.mesh_shape.replace(":", ""))
    return "-".join(parts)


LM_VARIANTS = ("vanilla", "random", "dense_vanilla")
CASES = tuple(
    [Case(v.name) for v in attentions.VARIANTS] +
    [Case(v, "lm") for v in LM_VARIANTS] +
    [Case(v, layout="t5.1.1") for v in ("vanilla", "dense_vanilla",
                                         attentions.MESH_SELF_ATTENTION.name)] +
    [Case("random_vanilla", mesh_shape="model:%d" % MESH_DEVICES),
     Case("dense", variables="bfloat16")])
BY_NAME = {c.name: c for c in CASES}


def train_command(case: Case, model_dir: str) -> commands.Command:
  """The stock CLI's training command of a case.

  Args:
    case: a Case.
    model_dir: its model directory.

  Returns:
    The Command (byte vocabulary; the mesh case on MESH_DEVICES logical CPU
    devices).
  """
  lm = case.model_type == "lm"
  params = [ZERO_DROPOUT, "mesh_train_dataset_fn.shuffle = False",
            "mesh_train_dataset_fn.seed = 1"]
  params += BFLOAT16 if case.variables == "bfloat16" else FLOAT32
  if lm:
    params.append("utils.run.model_type = 'lm'")
  devices = None
  env = {"MTF_SYNTH_VOCAB": "byte"}
  if case.mesh_shape:
    devices = ["/cpu:%d" % i for i in range(MESH_DEVICES)]
    env["MTF_SYNTH_CPU_DEVICES"] = str(MESH_DEVICES)
  return commands.local_train(
      model_dir, case.variant, TRAIN_STEPS, length=LENGTH, batch_size=BATCH,
      mixture=LM_MIXTURE if lm else commands.SPAN_CORRUPTION,
      lengths={"targets": LENGTH} if lm else None, dims=DIMS,
      base_gin_files=(commands.DATASET_GIN, LAYOUT_GIN[case.layout]),
      mesh_shape=case.mesh_shape, mesh_devices=devices, gin_params=params,
      env=env)


def infer_command(case: Case, model_dir: str, input_file: str,
                  output_file: str) -> commands.Command:
  """The stock CLI's `infer.gin` decode of INPUT_TEXTS, as `decodes` is made.

  Args:
    case: a Case.
    model_dir: its trained model directory.
    input_file: a file of INPUT_TEXTS, one a line.
    output_file: the output prefix (mesh appends `-<step>`).

  Returns:
    The Command (on one device).
  """
  train = train_command(dataclasses.replace(case, mesh_shape=""), model_dir)
  command = commands.infer(train, input_file, output_file).extended(
      gin_params=["Bitransformer.decode.beam_size = 1",
                  "Bitransformer.decode.temperature = 0.0",
                  "Unitransformer.sample_autoregressive.temperature = 0.0",
                  "utils.run.batch_size = ('sequences_per_batch', %d)"
                  % len(INPUT_TEXTS)])
  if case.model_type == "lm":
    command = command.extended(gin_params=[
        "utils.run.sequence_length = %r" % {
            "inputs": LM_PROMPT, "targets": LENGTH - LM_PROMPT}])
  return command


CHECKPOINT_STATE = "checkpoint"
OPERATIVE_CONFIG = "operative_config.gin"
VALUES = "reference.npz"
METADATA = "case.json"


def keep_checkpoint(model_dir: str, out_dir: str,
                    step: Optional[int] = None) -> str:
  """Copies a run's checkpoint and operative config into `out_dir`.

  The index, the data shards and `operative_config.gin` as the CLI wrote
  them (not the graph, `.meta`, where the CLI wrote one); the `checkpoint`
  state file names only that checkpoint (the CLI's also lists the others,
  such as the step-0 checkpoint, which are not kept).

  Args:
    model_dir: the trained model directory.
    out_dir: the case's folder (created).
    step: the checkpoint's step (`model.ckpt-<step>`); None: the last.

  Returns:
    The kept checkpoint's prefix.
  """
  # pylint: disable-next=g-import-not-at-top
  from mtf_synthesizer.checkpoints import tf_format
  if step is None:
    prefix = tf_format.latest_checkpoint(model_dir)
  else:
    prefix = os.path.join(model_dir, "model.ckpt-%d" % step)
  base = os.path.basename(prefix)
  os.makedirs(out_dir, exist_ok=True)
  for entry in sorted(os.listdir(model_dir)):
    if (entry.startswith(base + ".") and not entry.endswith(".meta")) or (
        entry == OPERATIVE_CONFIG):  # the graph (.meta) is not read
      shutil.copyfile(os.path.join(model_dir, entry),
                      os.path.join(out_dir, entry))
  with open(os.path.join(out_dir, CHECKPOINT_STATE), "w") as f:
    f.write('model_checkpoint_path: "%s"\nall_model_checkpoint_paths: '
            '"%s"\n' % (base, base))
  return os.path.join(out_dir, base)


def _vocabulary():
  """The byte vocabulary of the runs (t5_tasks' offline vocabulary)."""
  # pylint: disable-next=g-import-not-at-top
  import seqio
  return seqio.ByteVocabulary()


def encoded_inputs(model_type: str) -> Dict[str, np.ndarray]:
  """The fixed inputs, encoded by mesh's `utils.encode_inputs`.

  Args:
    model_type: "bitransformer" or "lm".

  Returns:
    {"inputs", "targets"} for an encoder-decoder; {"prompts", "targets"}
    for a language model. int32 arrays.
  """
  # pylint: disable-next=g-import-not-at-top
  from mesh_tensorflow.transformer import utils as mtf_utils
  vocabulary = _vocabulary()
  batch = len(INPUT_TEXTS)
  targets = mtf_utils.encode_inputs(list(TARGET_TEXTS), vocabulary,
                                    "bitransformer", batch, LENGTH)
  if model_type == "lm":
    return {"prompts": mtf_utils.encode_inputs(
        list(INPUT_TEXTS), vocabulary, "lm", batch, LM_PROMPT),
            "targets": targets}
  return {"inputs": mtf_utils.encode_inputs(
      list(INPUT_TEXTS), vocabulary, "bitransformer", batch, LENGTH),
          "targets": targets}


# gin's configuration is global: one model is built at a time (also by the
# other modules that parse a run's operative config in process).
GIN_LOCK = threading.Lock()


def compute(case_dir: str) -> Dict[str, np.ndarray]:
  """Mesh's values from a kept checkpoint (see the module docstring).

  Args:
    case_dir: a folder with a checkpoint and its `operative_config.gin`.

  Returns:
    name -> array: the inputs and the values of DEFINITIONS.
  """
  with GIN_LOCK:
    return _compute(case_dir)


def _compute(case_dir: str) -> Dict[str, np.ndarray]:
  """`compute`, holding the gin lock."""
  # pylint: disable=g-import-not-at-top
  import gin
  import mesh_tensorflow as mtf
  from mesh_tensorflow.transformer import transformer
  from mesh_tensorflow.transformer import utils as mtf_utils
  import tensorflow.compat.v1 as tf
  import mtf_synthesizer  # pylint: disable=unused-import  (its configurables)
  import t5.models  # pylint: disable=unused-import
  from mtf_synthesizer.checkpoints import tf_format
  from workbench import tiny_model
  # pylint: enable=g-import-not-at-top
  prefix = tf_format.latest_checkpoint(case_dir)
  reader = tf_format.CheckpointReader(prefix)
  vocab = next(reader.shape(n)[0] for n in reader.variable_names()
               if n.split("/")[-1] == "embedding")
  gin.clear_config()
  gin.parse_config_file(os.path.join(case_dir, OPERATIVE_CONFIG),
                        skip_unknown=True)
  try:
    model_type = gin.query_parameter("utils.run.model_type")
    arrays = encoded_inputs(model_type)
    eval_mode, train_mode = (tf.estimator.ModeKeys.EVAL,
                             tf.estimator.ModeKeys.TRAIN)
    with tf.Graph().as_default():
      graph = mtf.Graph()
      mesh = mtf.Mesh(graph, "mesh")

      def imported(array):
        dims = [mtf.Dimension("batch", array.shape[0]),
                mtf.Dimension("length", array.shape[1])]
        return mtf.import_fully_replicated(
            mesh, tf.constant(array, tf.int32), dims)

      model = mtf_utils.build_model(
          model_type=model_type, input_vocab_size=vocab,
          output_vocab_size=vocab,
          layout_rules=mtf.convert_to_layout_rules(""),
          mesh_shape=mtf.convert_to_shape(""))
      dtype = mtf_utils.get_variable_dtype()
      targets = imported(arrays["targets"])
      outputs = {}
      if model_type == "lm":
        decoder_inputs = transformer.autoregressive_inputs(targets)
        outputs["decoder_inputs"] = decoder_inputs
        simple = lambda mode: model.call_simple(
            inputs=decoder_inputs, targets=targets, compute_loss=True,
            mode=mode, variable_dtype=dtype)
        prompts = imported(arrays["prompts"])
        # mesh's PREDICT model function: room for the targets, then the
        # continuation of the prompts, the prompts removed.
        padded = mtf.pad(prompts, [0, LENGTH - LM_PROMPT], "length")
        samples = model.sample_autoregressive(
            padded, temperature=0.0, variable_dtype=dtype,
            remove_partial_sequences=True)
      else:
        inputs = imported(arrays["inputs"])
        encoded = []
        encoder_call = model.encoder.call_simple

        def recording(*args, **kwargs):
          out = encoder_call(*args, **kwargs)
          encoded.append(out[0])
          return out

        model.encoder.call_simple = recording
        simple = lambda mode: model.call_simple(
            inputs=inputs, targets=targets, compute_loss=True, mode=mode,
            variable_dtype=dtype)
        outputs["decoder_inputs"] = transformer.autoregressive_inputs(
            targets, sequence_id=mtf.minimum(targets, 1))
        samples = model.decode(inputs, variable_dtype=dtype, beam_size=1,
                               temperature=0.0)
      logits, loss = simple(eval_mode)
      if model_type != "lm":
        outputs["encoder_output"] = mtf.cast(encoded[-1], tf.float32)
      _, train_loss = simple(train_mode)
      outputs.update(logits=mtf.cast(logits, tf.float32),
                     loss=mtf.cast(loss, tf.float32),
                     train_loss=mtf.cast(train_loss, tf.float32),
                     decodes=mtf.anonymize(samples))
      lowering = tiny_model.lower(graph, mesh,
                                  tiny_model.placement_mesh_impl())
      tf_outputs = {k: lowering.export_to_tf_tensor(v)
                    for k, v in outputs.items()}
      tf_outputs["decodes"] = mtf_utils.clean_decodes(tf_outputs["decodes"])
      masters = [v.get_master() for v in graph.all_variables]
      saver = tf.train.Saver(masters)
      config = tf.ConfigProto(device_count={"CPU": 1})
      config.graph_options.rewrite_options.disable_meta_optimizer = True
      with tf.Session(config=config) as session:
        session.run(tf.global_variables_initializer())
        saver.restore(session, prefix)
        session.run(lowering.copy_masters_to_slices())
        values = session.run(tf_outputs)
  finally:
    gin.clear_config()
  arrays.update({k: np.asarray(v) for k, v in values.items()})
  for key in ("decodes", "decoder_inputs"):
    arrays[key] = arrays[key].astype(np.int32)
  return arrays


def metadata(case: Case) -> Dict[str, object]:
  """case.json's contents: the case, its sizes, what each array holds."""
  return {
      "case": dataclasses.asdict(case),
      "components": list(attentions.get(case.variant).components),
      "label": attentions.get(case.variant).label,
      "train_steps": TRAIN_STEPS, "length": LENGTH,
      "prompt_length": LM_PROMPT if case.model_type == "lm" else None,
      "dims": DIMS, "vocabulary": "byte (seqio.ByteVocabulary, padded to a "
      "multiple of 128 by mesh)", "input_texts": list(INPUT_TEXTS),
      "target_texts": list(TARGET_TEXTS), "arrays": DEFINITIONS,
      "train_command": commands.format_command(train_command(
          case, "$MODEL_DIR")).replace(commands.cli_path(),
                                       commands.CLI_NAME),
  }


def write_values(case_dir: str, values: Dict[str, np.ndarray]) -> None:
  """Writes `reference.npz` (uncompressed: reproducible bytes)."""
  np.savez(os.path.join(case_dir, VALUES), **values)


def read_values(case_dir: str) -> Dict[str, np.ndarray]:
  """The kept `reference.npz` of a case."""
  with np.load(os.path.join(case_dir, VALUES)) as data:
    return {k: data[k] for k in data.files}


def cli_decodes(case: Case, model_dir: str, work_dir: str) -> List[str]:
  """The stock CLI's decodes of INPUT_TEXTS (`--mode=infer`), as text."""
  # pylint: disable-next=g-import-not-at-top
  import ast
  input_file = os.path.join(work_dir, case.name + ".inputs.txt")
  with open(input_file, "w") as f:
    f.write("\n".join(INPUT_TEXTS) + "\n")
  output = os.path.join(work_dir, case.name + ".decodes")
  result = runner.run(infer_command(case, model_dir, input_file, output),
                      timeout=900)
  if result.returncode:
    raise RuntimeError("%s: the CLI's decode failed:\n%s" % (
        case.name, result.output[-3000:]))
  with open("%s-%d" % (output, TRAIN_STEPS)) as f:
    return [ast.literal_eval(line).decode("utf-8", "replace")
            for line in f.read().split("\n") if line]


def decoded_texts(decodes: np.ndarray) -> List[str]:
  """Byte ids (0-padded, EOS-cut) as the CLI writes them, decoded."""
  vocabulary = _vocabulary()
  return [vocabulary.decode([int(i) for i in row if i not in (0, 1)])
          for row in decodes]


def generate_case(case: Case, out_root: str, work_dir: str,
                  check_cli_decodes: bool = True) -> Dict[str, object]:
  """Trains a case with the stock CLI and writes its folder.

  Args:
    case: a Case.
    out_root: the folder of all cases; the case goes to `<out_root>/<name>`.
    work_dir: a scratch folder for the run.
    check_cli_decodes: also decode INPUT_TEXTS with the CLI's `--mode=infer`
      and require its texts to be those of `decodes`.

  Returns:
    {"case", "seconds", "bytes"}.

  Raises:
    RuntimeError: the CLI failed, or its decodes differ from `decodes`.
  """
  start = time.time()
  model_dir = os.path.join(work_dir, case.name)
  result = runner.run(train_command(case, model_dir), timeout=900)
  if result.returncode:
    raise RuntimeError("%s: training failed:\n%s" % (
        case.name, result.output[-3000:]))
  case_dir = os.path.join(out_root, case.name)
  shutil.rmtree(case_dir, ignore_errors=True)
  keep_checkpoint(model_dir, case_dir)
  values = compute(case_dir)
  if check_cli_decodes:
    texts = cli_decodes(case, model_dir, work_dir)
    if texts != decoded_texts(values["decodes"]):
      raise RuntimeError("%s: the CLI decodes %r, the reference %r" % (
          case.name, texts, decoded_texts(values["decodes"])))
  write_values(case_dir, values)
  with open(os.path.join(case_dir, METADATA), "w") as f:
    json.dump(metadata(case), f, indent=1, sort_keys=True)
    f.write("\n")
  size = sum(os.path.getsize(os.path.join(case_dir, e))
             for e in os.listdir(case_dir))
  return {"case": case.name, "seconds": round(time.time() - start, 1),
          "bytes": size}


def generate(out_root: str, cases: Sequence[Case] = CASES,
             workers: int = 2, check_cli_decodes: bool = True,
             on_done: Optional[Callable[[Dict[str, object]], None]] = None
             ) -> List[Dict[str, object]]:
  """Regenerates the cases' folders, `workers` CLI runs at a time.

  Args:
    out_root: the folder of all cases (tests/data/mesh_reference).
    cases: which cases.
    workers: cases at a time.
    check_cli_decodes: see `generate_case`.
    on_done: called with each case's summary as it finishes.

  Returns:
    The summaries, in the order of `cases`.
  """
  os.makedirs(out_root, exist_ok=True)
  with tempfile.TemporaryDirectory() as work_dir:
    def one(case):
      summary = generate_case(case, out_root, work_dir, check_cli_decodes)
      if on_done:
        on_done(summary)
      return summary

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
      return list(pool.map(one, cases))
