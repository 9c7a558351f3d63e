# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
r"""Runs the Synthesizer paper's experiments as Cloud TPU batch jobs.

Composes `t5_mesh_transformer` command lines (the stock T5 CLI, with
`--module_import=mtf_synthesizer --module_import=t5_tasks`) for the stages
of one experiment, and runs them one after the other, streaming their output
and stopping at the first failure. With --dry_run it only prints them, with
the gcloud command that creates the TPU and the TensorBoard command; nothing
touches the network.

Each experiment is a gin file in gin/experiments/ (task,
lengths, steps, learning rate, model type), used after the T5 model file of
the chosen size and before the variant file.

Stages:
  pretrain  train from scratch on the experiment's training mixture (C4 span
            corruption for c4_glue_superglue; the task itself otherwise).
  finetune  (c4_glue_superglue only) continue from the pretrained checkpoint
            on GLUE + SuperGLUE.
  eval      perplexity of the pretrained model on its validation split;
            decode-and-score of the finetuned (or trained) model.
  all       the three in order.

How finetuning is run. t5 0.9.4's `--mode=finetune` (the Model API) is not
usable: `mesh_transformer_main.py` calls `MtfModel.finetune(steps=...)`, whose
signature is `finetune(finetune_steps, ..., pretrained_checkpoint_step)`, and
`MtfModel.finetune` re-parses the pretrained operative config, which binds the
layer stacks explicitly and so undoes the variant's layer swap. We use the
gin route of T5's README instead (no --mode): the new model directory is
trained with `utils.run.init_checkpoint` pointing at the pretrained
checkpoint, after these gin files, in this order:
  <pretrain model_dir>/operative_config.gin, synthesizer/<variant>.gin
  (again, AFTER the operative config, so the swap holds),
  experiments/glue_super_glue_finetune.gin (mixture, lengths, constant
  learning rate).
`global_step` is restored from the checkpoint, so `utils.run.train_steps` is
absolute: pretrain_steps + finetune_steps.

Example (the paper's Table 4-6 setting):
  python tools/tpu_job.py --dry_run --tpu=synth-v3 --zone=europe-west4-a \
    --gcp_project=my-project --bucket=gs://my-bucket --tpu_topology=2x2 \
    --variant=random_vanilla --model_size=base --stage=all
"""

import argparse
import dataclasses
import importlib.util
import os
import re
import subprocess
import sys
from typing import List, Optional, Sequence



def _load_mesh_defaults():
  """Imports mtf_synthesizer/mesh_defaults.py alone.

  Importing the package would import TensorFlow and mesh (seconds, and not
  needed to compose commands); mesh_defaults depends on neither.

  Returns:
    The module.
  """
  path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))), "mtf_synthesizer", "mesh_defaults.py")
  spec = importlib.util.spec_from_file_location(
      "mtf_synthesizer_mesh_defaults", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


mesh_defaults = _load_mesh_defaults()

VARIANTS = ("vanilla", "random", "fixed_random", "factorized_random", "dense",
            "factorized_dense", "random_dense", "dense_vanilla",
            "random_vanilla", "factorized_random_vanilla")
STAGES = ("pretrain", "finetune", "eval")

# T5 model gin files, per T5 version. T5 1.1 names its 3B and 11B "xl" and
# "xxl". The paper (2020) uses T5 1.0.
_MODEL_GIN = {
    "1.0": {s: "models/t5.1.0.%s.gin" % s for s in mesh_defaults.MODEL_SIZES},
    "1.1": {"small": "models/t5.1.1.small.gin",
            "base": "models/t5.1.1.base.gin",
            "large": "models/t5.1.1.large.gin",
            "3B": "models/t5.1.1.xl.gin",
            "11B": "models/t5.1.1.xxl.gin"},
}

# (num_heads, d_ff) of each model gin, to check them against the mesh.
_MODEL_DIMS = {
    "1.0": {"small": (8, 2048), "base": (12, 3072), "large": (16, 4096),
            "3B": (32, 16384), "11B": (128, 65536)},
    "1.1": {"small": (6, 1024), "base": (12, 2048), "large": (16, 2816),
            "3B": (32, 5120), "11B": (64, 10240)},
}
# T5's SentencePiece vocabulary (32100 ids) padded by mesh's vocab_divisor
# (128).
_VOCAB_SIZE = 32128


@dataclasses.dataclass(frozen=True)
class Experiment:
  """One experiment of the paper.

  The gin files in `gin/experiments/` hold the settings (task,
  lengths, steps, learning rate, model type); the fields below repeat what
  the tool needs to compose and check commands without parsing gin, and
  tests/test_experiments.py checks that both agree.

  Attributes:
    gin_file: the experiment file of the first (training) stage.
    train_mixture: mixture or task of that stage.
    train_lengths: its sequence lengths (inputs, targets); inputs None for a
      language model.
    train_steps: its step count.
    model_type: `utils.run.model_type`: "bitransformer", "lm" or "aligned"
      (the encoder-only classifier).
    finetune_gin_file: the experiment file of the finetune stage (None: no
      finetuning).
    finetune_mixture: mixture of the finetune stage.
    finetune_lengths: its sequence lengths.
    eval_split: the split evaluated ("test" where the data set has no
      validation split).
    paper: where the paper reports it.
  """
  gin_file: str
  train_mixture: str
  train_lengths: tuple
  train_steps: int = 262144
  model_type: str = "bitransformer"
  finetune_gin_file: Optional[str] = None
  finetune_mixture: Optional[str] = None
  finetune_lengths: tuple = (512, 128)
  eval_split: str = "validation"
  paper: str = ""


# Mixture and task names as `t5_tasks` registers them.
EXPERIMENTS = {
    "c4_glue_superglue": Experiment(
        "experiments/c4_span_corruption.gin", "synth_c4_span_corruption",
        (512, 114), 524288,
        finetune_gin_file="experiments/glue_super_glue_finetune.gin",
        finetune_mixture="synth_glue_super_glue_proportional",
        paper="Tables 4-6: C4 span corruption, then GLUE + SuperGLUE "
        "co-trained"),
    "wmt_ende": Experiment("experiments/wmt14_ende.gin", "synth_wmt14_ende",
                           (256, 256), paper="Table 2: WMT'14 En-De"),
    "wmt_enfr": Experiment("experiments/wmt14_enfr.gin", "synth_wmt14_enfr",
                           (256, 256), paper="Table 2: WMT'14 En-Fr"),
    "lm1b": Experiment("experiments/lm1b.gin", "synth_lm1b", (None, 256),
                       model_type="lm", eval_split="test",
                       paper="Table 2: LM1B, decoder-only language model"),
    "cnn_dm": Experiment("experiments/cnn_dailymail.gin",
                         "synth_cnn_dailymail", (512, 128),
                         paper="Table 3: CNN/Dailymail summarization"),
    "personachat": Experiment("experiments/personachat.gin",
                              "synth_personachat", (512, 128),
                              paper="Table 3: PersonaChat dialogue"),
    "ag_news": Experiment("experiments/ag_news.gin", "synth_ag_news",
                          (512, 512), 65536, model_type="aligned",
                          eval_split="test", paper="Table 7: AG News classification, "
                          "encoder only"),
    "imdb": Experiment("experiments/imdb.gin", "synth_imdb", (512, 512),
                       65536, model_type="aligned", eval_split="test",
                       paper="Table 7: IMDb sentiment classification, "
                       "encoder only"),
}

# The variants each table of the paper reports (gin file names).
TABLE_VARIANTS = {
    "Table 2-3": VARIANTS,
    "Table 4": ("vanilla", "random", "random_vanilla", "dense_vanilla"),
    "Tables 5-6": ("vanilla", "random", "dense", "random_vanilla",
                   "dense_vanilla"),
    "Table 7": ("vanilla", "factorized_random"),
}

DEFAULT_FINETUNE_STEPS = 262144  # 2**18, T5's finetuning length.
TOKENS_PER_BATCH = 65536  # T5: 128 sequences of 512 tokens.
TPU_SOFTWARE = "tpu-vm-tf-2.15.1-%sse"  # TPUEstimator needs stream executor.


def accelerator_type(tpu_topology: str, tpu_version: str = "v3") -> str:
  """The gcloud accelerator type ("v3-8") of a topology ("v3-8" or "2x2")."""
  if tpu_topology.startswith("v"):
    return tpu_topology
  return "%s-%d" % (tpu_version, mesh_defaults.num_cores(tpu_topology))


def _q(value: str) -> str:
  """Quotes a gin string value."""
  return "'%s'" % value


@dataclasses.dataclass
class Job:
  """The settings of one run of the tool (see `parse_args`)."""
  tpu: str
  zone: str
  gcp_project: str
  bucket: str
  tpu_topology: str
  variant: str
  model_size: str
  experiment: str = "c4_glue_superglue"
  t5_version: str = "1.0"
  model_parallelism: Optional[int] = None
  pretrain_steps: Optional[int] = None
  finetune_steps: int = DEFAULT_FINETUNE_STEPS
  tpu_version: str = "v3"
  extra_gin_params: Sequence[str] = ()

  def __post_init__(self):
    if not self.bucket.startswith("gs://"):
      raise ValueError("--bucket must be a gs:// path, got %r" % self.bucket)
    self.bucket = self.bucket.rstrip("/")
    if self.variant not in VARIANTS:
      raise ValueError("Unknown variant %r; one of %s" %
                       (self.variant, ", ".join(VARIANTS)))
    if self.experiment not in EXPERIMENTS:
      raise ValueError("Unknown experiment %r; one of %s" %
                       (self.experiment, ", ".join(EXPERIMENTS)))
    cores = mesh_defaults.num_cores(self.tpu_topology)
    if self.model_parallelism is None:
      self.model_parallelism = mesh_defaults.model_parallelism(
          self.model_size, cores)
    if self.pretrain_steps is None:
      self.pretrain_steps = EXPERIMENTS[self.experiment].train_steps
    self.check_mesh()

  @property
  def exp(self) -> Experiment:
    return EXPERIMENTS[self.experiment]

  @property
  def root_dir(self) -> str:
    return "%s/synthesizer/%s/%s/%s" % (self.bucket, self.experiment,
                                        self.model_size, self.variant)

  @property
  def pretrain_dir(self) -> str:
    return self.root_dir + "/pretrain"

  @property
  def finetune_dir(self) -> str:
    return "%s/finetune/%s" % (self.root_dir, self.exp.finetune_mixture)

  @property
  def mesh_shape(self) -> str:
    return mesh_defaults.mesh_shape(self.tpu_topology, self.model_parallelism)

  def check_mesh(self) -> None:
    """Fails early when the model does not split over the mesh."""
    heads, d_ff = _MODEL_DIMS[self.t5_version][self.model_size]
    lengths = [self.exp.train_lengths, self.exp.finetune_lengths]
    batch = min(TOKENS_PER_BATCH // max(n for n in l if n) for l in lengths)
    mesh_defaults.check_divisible(
        {"heads": heads, "d_ff": d_ff, "vocab": _VOCAB_SIZE,
         "batch": batch},
        self.mesh_shape, mesh_defaults.layout_rules())

  def _base(self, model_dir: str) -> List[str]:
    return ["t5_mesh_transformer",
            "--tpu=%s" % self.tpu,
            "--gcp_project=%s" % self.gcp_project,
            "--tpu_zone=%s" % self.zone,
            "--model_dir=%s" % model_dir,
            "--t5_tfds_data_dir=%s/tensorflow_datasets" % self.bucket,
            "--module_import=mtf_synthesizer",
            "--module_import=t5_tasks"]

  def _mesh_params(self) -> List[str]:
    params = [
        "utils.tpu_mesh_shape.tpu_topology = %s" % _q(self.tpu_topology),
        "utils.tpu_mesh_shape.model_parallelism = %d" %
        self.model_parallelism,
        "utils.run.layout_rules = %s" % _q(mesh_defaults.layout_rules()),
    ]
    return ["--gin_param=%s" % p for p in params]

  def _lengths(self, lengths: tuple) -> str:
    inputs, targets = lengths
    if inputs is None:
      return ("--gin_param=utils.run.sequence_length = {'targets': %d}" %
              targets)
    return ("--gin_param=utils.run.sequence_length = "
            "{'inputs': %d, 'targets': %d}" % (inputs, targets))

  def _extra(self) -> List[str]:
    return ["--gin_param=%s" % p for p in self.extra_gin_params]

  def variant_gin(self) -> str:
    return "--gin_file=synthesizer/%s.gin" % self.variant

  def model_gin(self) -> str:
    return "--gin_file=%s" % _MODEL_GIN[self.t5_version][self.model_size]

  def pretrain(self) -> List[str]:
    """Trains from scratch: model size, experiment file, variant file."""
    return (self._base(self.pretrain_dir) + [
        self.model_gin(),
        "--gin_file=%s" % self.exp.gin_file,
        self.variant_gin(),
        "--gin_param=utils.run.train_steps = %d" % self.pretrain_steps,
    ] + self._mesh_params() + self._extra())

  def finetune(self) -> List[str]:
    """Continues from the last pretrained checkpoint (see module doc)."""
    return (self._base(self.finetune_dir) + [
        "--gin_file=%s/operative_config.gin" % self.pretrain_dir,
        # After the operative config, which binds the layer stacks.
        self.variant_gin(),
        "--gin_file=%s" % self.exp.finetune_gin_file,
        "--gin_param=utils.run.init_checkpoint = %s" %
        _q("%s/model.ckpt-%d" % (self.pretrain_dir, self.pretrain_steps)),
        # Absolute: the pretrained global_step is restored.
        "--gin_param=utils.run.train_steps = %d" %
        (self.pretrain_steps + self.finetune_steps),
    ] + self._mesh_params() + self._extra())

  def _eval(self, model_dir: str, mixture: str, gin_file: str,
            lengths: tuple) -> List[str]:
    return (self._base(model_dir) + [
        "--gin_file=%s/operative_config.gin" % model_dir,
        self.variant_gin(),
        "--gin_file=%s" % gin_file,
        "--gin_param=MIXTURE_NAME = %s" % _q(mixture),
        "--gin_param=utils.run.dataset_split = %s" % _q(self.exp.eval_split),
        "--gin_param=eval_checkpoint_step = 'all'",
        self._lengths(lengths),
    ] + self._mesh_params() + self._extra())

  def evals(self) -> List[List[str]]:
    """Perplexity of the pretrained model; decodes of the finetuned one."""
    exp = self.exp
    if exp.finetune_mixture is None:
      gin_file = ("perplexity_eval.gin" if exp.model_type == "lm"
                  else "eval.gin")
      return [self._eval(self.pretrain_dir, exp.train_mixture, gin_file,
                         exp.train_lengths)]
    return [
        self._eval(self.pretrain_dir, exp.train_mixture,
                   "perplexity_eval.gin", exp.train_lengths),
        self._eval(self.finetune_dir, exp.finetune_mixture, "eval.gin",
                   exp.finetune_lengths)]

  def commands(self, stage: str) -> List[List[str]]:
    """The t5_mesh_transformer commands of a stage ("all": every stage)."""
    if stage == "all":
      return [c for s in STAGES for c in self.commands(s)]
    if stage == "pretrain":
      return [self.pretrain()]
    if stage == "finetune":
      return [self.finetune()] if self.exp.finetune_mixture else []
    if stage == "eval":
      return self.evals()
    raise ValueError("Unknown stage %r" % stage)

  def create_tpu_command(self) -> List[str]:
    accel = accelerator_type(self.tpu_topology, self.tpu_version)
    multi_host = mesh_defaults.num_cores(self.tpu_topology) > 8
    return ["gcloud", "compute", "tpus", "tpu-vm", "create", self.tpu,
            "--zone=%s" % self.zone, "--project=%s" % self.gcp_project,
            "--accelerator-type=%s" % accel,
            "--version=%s" % (TPU_SOFTWARE % ("pod-" if multi_host else ""))]

  def tensorboard_command(self) -> List[str]:
    return ["tensorboard", "--logdir=%s" % self.root_dir]


def shell_quote(arg: str) -> str:
  """Quotes an argument for a POSIX shell, in double quotes when needed.

  Gin values use single quotes, so double quotes read naturally:
  "--gin_param=MIXTURE_NAME = 'glue_v002_proportional'".

  Args:
    arg: one argument.

  Returns:
    The argument, quoted when the shell would otherwise change it.
  """
  if arg and re.fullmatch(r"[A-Za-z0-9_@%+=:,./-]+", arg):
    return arg
  return '"%s"' % re.sub(r'(["\\$`])', r"\\\1", arg)


def format_command(argv: Sequence[str]) -> str:
  """A shell-ready command: the leading words, then one flag per line."""
  words = [shell_quote(a) for a in argv]
  head = 1
  while head < len(words) and not argv[head].startswith("-"):
    head += 1
  return " \\\n    ".join([" ".join(words[:head])] + words[head:])


def run_commands(commands: Sequence[Sequence[str]]) -> int:
  """Runs each command, streaming its output; stops at the first failure.

  Args:
    commands: argv lists.

  Returns:
    0, or the exit status of the command that failed.
  """
  for argv in commands:
    print("+ " + format_command(argv), flush=True)
    with subprocess.Popen(list(argv), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True,
                          bufsize=1) as proc:
      for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
      status = proc.wait()
    if status:
      print("tpu_job: command failed with status %d; stopping." % status,
            file=sys.stderr)
      return status
  return 0


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
  """Parses the command line."""
  p = argparse.ArgumentParser(
      description=__doc__.split("\n\n")[0],
      formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--tpu", required=True, help="TPU name")
  p.add_argument("--zone", required=True, help="e.g. europe-west4-a")
  p.add_argument("--gcp_project", required=True)
  p.add_argument("--bucket", required=True, help="gs://bucket[/prefix]")
  p.add_argument("--tpu_topology", default="v3-8",
                 help="'v3-8', 'v3-32', or a chip grid such as '2x2'")
  p.add_argument("--tpu_version", default="v3",
                 help="TPU generation for a chip-grid topology (gcloud)")
  p.add_argument("--variant", default="random", choices=VARIANTS)
  p.add_argument("--model_size", default="base",
                 choices=mesh_defaults.MODEL_SIZES)
  p.add_argument("--t5_version", default="1.0", choices=sorted(_MODEL_GIN))
  p.add_argument("--experiment", default="c4_glue_superglue",
                 choices=sorted(EXPERIMENTS))
  p.add_argument("--stage", default="all", choices=STAGES + ("all",))
  p.add_argument("--model_parallelism", type=int, default=None,
                 help="default: mesh_defaults.model_parallelism(size)")
  p.add_argument("--pretrain_steps", type=int, default=None,
                 help="steps of the pretrain stage (default: the paper's)")
  p.add_argument("--finetune_steps", type=int,
                 default=DEFAULT_FINETUNE_STEPS)
  p.add_argument("--gin_param", action="append", default=[],
                 help="extra gin binding for every command (repeatable)")
  p.add_argument("--create_tpu", action="store_true",
                 help="also run the gcloud command that creates the TPU")
  p.add_argument("--dry_run", action="store_true",
                 help="print the commands, run nothing")
  return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
  args = parse_args(argv)
  try:
    job = Job(tpu=args.tpu, zone=args.zone, gcp_project=args.gcp_project,
              bucket=args.bucket, tpu_topology=args.tpu_topology,
              variant=args.variant, model_size=args.model_size,
              experiment=args.experiment, t5_version=args.t5_version,
              model_parallelism=args.model_parallelism,
              pretrain_steps=args.pretrain_steps,
              finetune_steps=args.finetune_steps,
              tpu_version=args.tpu_version,
              extra_gin_params=args.gin_param)
  except ValueError as e:
    print("tpu_job: %s" % e, file=sys.stderr)
    return 2
  commands = job.commands(args.stage)
  if args.dry_run:
    print("# experiment %s (%s); variant %s; T5 %s %s; mesh %s" %
          (job.experiment, job.exp.paper, job.variant, job.t5_version,
           job.model_size, job.mesh_shape))
    print("# create the TPU:")
    print(format_command(job.create_tpu_command()))
    print("# watch training:")
    print(format_command(job.tensorboard_command()))
    for i, argv_ in enumerate(commands):
      print("# step %d of %d" % (i + 1, len(commands)))
      print(format_command(argv_))
    return 0
  if args.create_tpu:
    commands = [job.create_tpu_command()] + commands
  return run_commands(commands)


if __name__ == "__main__":
  sys.exit(main())
