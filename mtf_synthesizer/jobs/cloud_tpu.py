# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The paper's experiments as Cloud TPU commands (tools/tpu_job.py,
tools/paper_commands.py).

Each experiment is a gin file in gin/experiments/ (task, lengths, steps,
learning rate, model type), used after the T5 model file of the chosen size
and before the attention file: a variant (`gin/synthesizer/<name>.gin`,
mtf_synthesizer/attentions.py) or a baseline (`gin/baselines/<name>.gin`,
mtf_synthesizer/attentions.py). A `Job` composes the `t5_mesh_transformer`
commands (`commands.tpu`) of its stages:

  pretrain  train from scratch on the experiment's training mixture (C4 span
            corruption for c4_glue_superglue; the task itself otherwise).
  finetune  (c4_glue_superglue only) continue from the pretrained checkpoint
            on GLUE + SuperGLUE.
  eval      perplexity of the pretrained model on its validation split;
            decode-and-score of the finetuned (or trained) model.

How finetuning is run. t5 0.9.4's `--mode=finetune` (the Model API) is not
usable: `mesh_transformer_main.py` calls `MtfModel.finetune(steps=...)`, whose
signature is `finetune(finetune_steps, ..., pretrained_checkpoint_step)`, and
`MtfModel.finetune` re-parses the pretrained operative config, which binds the
layer stacks explicitly and so undoes the variant's layer swap. We use the
gin route of T5's README instead (no --mode): the new model directory is
trained with `utils.run.init_checkpoint` pointing at the pretrained
checkpoint, after these gin files, in this order:
  <pretrain model_dir>/operative_config.gin, the attention file (again,
  AFTER the operative config, so the swap holds),
  experiments/glue_super_glue_finetune.gin (mixture, lengths, constant
  learning rate).
`global_step` is restored from the checkpoint, so `utils.run.train_steps` is
absolute: pretrain_steps + finetune_steps.

The experiments and the paper's tables are data in
mtf_synthesizer/jobs/experiments.py; `table_commands` prints a table's
commands.
"""

import dataclasses
import signal
import sys
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from mtf_synthesizer import attentions
from mtf_synthesizer.jobs import commands
from mtf_synthesizer.jobs import datasets
from mtf_synthesizer.jobs import experiments
from mtf_synthesizer.jobs import mesh_defaults
from mtf_synthesizer.jobs import preflight
from mtf_synthesizer.jobs import runner
from mtf_synthesizer.stock_cli import tpu_checks

TPU_SOFTWARE = "tpu-vm-tf-2.15.1-%sse"  # TPUEstimator needs stream executor.


def accelerator_type(tpu_topology: str, tpu_version: str = "v3") -> str:
  """The gcloud accelerator type of a topology.

  Args:
    tpu_topology: "v3-8" (returned as it is) or a chip grid ("2x2").
    tpu_version: the TPU generation of a chip grid.

  Returns:
    e.g. "v3-8".
  """
  if tpu_topology.startswith("v"):
    return tpu_topology
  return "%s-%d" % (tpu_version, mesh_defaults.num_cores(tpu_topology))


def _q(value: str) -> str:
  """Quotes a gin string value."""
  return "'%s'" % value


def _lengths(lengths: tuple) -> str:
  inputs, targets = lengths
  value = {"targets": targets} if inputs is None else {
      "inputs": inputs, "targets": targets}
  return "utils.run.sequence_length = %r" % (value,)


# What takes the place of self-attention in a job.
def resolve_attention(variant: Optional[str] = None,
                      baseline: Optional[str] = None) -> attentions.Attention:
  """The attention of a job: a variant or a baseline, exactly one.

  Args:
    variant: a name of `attentions.VARIANT_NAMES`.
    baseline: a name of `attentions.BASELINE_NAMES`.

  Returns:
    The table's row; its `gin_file` is the attention file.

  Raises:
    ValueError: for neither or both, or an unknown name.
  """
  if (variant is None) == (baseline is None):
    raise ValueError("A job's attention is a variant or a baseline: give "
                     "exactly one (got variant %r, baseline %r)" %
                     (variant, baseline))
  if baseline is not None:
    return attentions.get(baseline, attentions.Kind.BASELINE)
  return attentions.get(variant, attentions.Kind.SYNTHESIZER)


def attention_dir(attention: attentions.Attention) -> str:
  """The model directory's component (under <experiment>/<size>/).

  Args:
    attention: a Variant or a Baseline.

  Returns:
    The variant's name; "baselines/<name>" for a baseline, so that no
    baseline's directory can be a variant's.
  """
  if attention.is_baseline:
    return "baselines/" + attention.name
  return attention.name


def describe_attention(attention: attentions.Attention) -> str:
  """E.g. "variant random", "baseline linformer (Linformer)"."""
  if attention.is_baseline:
    return "baseline %s (%s)" % (attention.name, attention.label)
  return "variant %s" % attention.name


@dataclasses.dataclass
class Job:
  """The settings of one run of tools/tpu_job.py (see its flags).

  Its attention is `variant` or `baseline`: exactly one is set. `tpu` is
  what the stock CLI drives: `local`, the TPU of the TPU VM the job runs on
  (`stock_cli/tpu_checks.py`). `zone` and `gcp_project` name where the TPU
  VM is created (the printed `gcloud` command), and are handed to the CLI
  only with a TPU's name, which is looked up in them. `data_dir` is the TFDS
  data folder every command reads (default `<bucket>/tensorflow_datasets`).
  """
  bucket: str
  tpu_topology: str
  model_size: str
  tpu: str = "local"
  zone: Optional[str] = None
  gcp_project: Optional[str] = None
  tpu_vm_name: Optional[str] = None
  variant: Optional[str] = None
  baseline: Optional[str] = None
  experiment: str = "c4_glue_superglue"
  t5_version: str = "1.0"
  model_parallelism: Optional[int] = None
  pretrain_steps: Optional[int] = None
  finetune_steps: int = experiments.DEFAULT_FINETUNE_STEPS
  tpu_version: str = "v3"
  extra_gin_params: Sequence[str] = ()
  data_dir: Optional[str] = None

  def __post_init__(self):
    if not self.bucket.startswith("gs://"):
      raise ValueError("--bucket must be a gs:// path, got %r" % self.bucket)
    self.bucket = self.bucket.rstrip("/")
    attention = self.attention  # Checks the names.
    if self.experiment not in experiments.EXPERIMENTS:
      raise ValueError("Unknown experiment %r; one of %s" %
                       (self.experiment, ", ".join(experiments.EXPERIMENTS)))
    self.check_causal(attention)
    cores = mesh_defaults.num_devices(self.tpu_topology, self.tpu_version)
    if self.model_parallelism is None:
      self.model_parallelism = mesh_defaults.model_parallelism(
          self.model_size, cores)
    if self.pretrain_steps is None:
      self.pretrain_steps = self.exp.train_steps
    self.check_mesh()

  @property
  def exp(self) -> experiments.Experiment:
    return experiments.EXPERIMENTS[self.experiment]

  @property
  def attention(self) -> attentions.Attention:
    """The variant or the baseline."""
    return resolve_attention(self.variant, self.baseline)

  @property
  def root_dir(self) -> str:
    return "%s/synthesizer/%s/%s/%s" % (self.bucket, self.experiment,
                                        self.model_size,
                                        attention_dir(self.attention))

  @property
  def tfds_data_dir(self) -> str:
    """Where every command reads its data (`--t5_tfds_data_dir`).

    `data_dir` when given, else `<bucket>/tensorflow_datasets`.
    """
    return self.data_dir or self.bucket + "/tensorflow_datasets"

  def mixtures(self, stage: str) -> List[str]:
    """The mixtures and tasks the commands of a stage read.

    Args:
      stage: one of experiments.STAGES, or "all".

    Returns:
      Their names, in the order the stages read them.
    """
    stages = experiments.STAGES if stage == "all" else (stage,)
    names = []
    for one in stages:
      if one in ("pretrain", "eval"):
        names.append(self.exp.train_mixture)
      if one in ("finetune", "eval") and self.exp.finetune_mixture:
        names.append(self.exp.finetune_mixture)
    return list(dict.fromkeys(names))

  @property
  def pretrain_dir(self) -> str:
    return self.root_dir + "/pretrain"

  @property
  def finetune_dir(self) -> str:
    return "%s/finetune/%s" % (self.root_dir, self.exp.finetune_mixture)

  @property
  def mesh_shape(self) -> str:
    return mesh_defaults.mesh_shape(self.tpu_topology, self.model_parallelism,
                                    self.tpu_version)

  def check_causal(self, attention: attentions.Attention) -> None:
    """Refuses a non-causal baseline where the only stack is causal.

    A decoder-only language model has one, causal, self-attention stack. In
    an encoder-decoder such a baseline's gin file replaces the encoder's
    self-attention only (the decoder keeps its own); in an encoder-only
    model ("aligned") nothing is causal.

    Args:
      attention: the job's attention.

    Raises:
      ValueError: for a non-causal baseline in a language model.
    """
    if (attention.is_baseline and not attention.causal
        and self.exp.model_type == "lm"):
      raise ValueError(
          "%s cannot be used in experiment %s (%s): its model is a "
          "decoder-only language model (utils.run.model_type = 'lm'), whose "
          "self-attention is causal, and %s is not causal (encoders and "
          "encoder-only models only; docs/baselines.md). Choose an "
          "encoder-decoder or encoder-only experiment." %
          (describe_attention(attention), self.experiment, self.exp.paper,
           attention.label))

  def check_mesh(self) -> None:
    """Fails early when the model does not split over the mesh."""
    heads, d_ff = experiments.MODEL_DIMS[self.t5_version][self.model_size]
    lengths = [self.exp.train_lengths, self.exp.finetune_lengths]
    batch = min(experiments.TOKENS_PER_BATCH // max(n for n in l if n)
                for l in lengths)
    mesh_defaults.check_divisible(
        {"heads": heads, "d_ff": d_ff, "vocab": experiments.VOCAB_SIZE,
         "batch": batch},
        self.mesh_shape, mesh_defaults.layout_rules())

  def _command(self, model_dir: str, gin_files: Sequence[str],
               gin_params: Sequence[str]) -> commands.Command:
    topology, logical_cores_per_chip = mesh_defaults.mesh_topology(
        self.tpu_topology, self.tpu_version)
    mesh = [
        "utils.tpu_mesh_shape.tpu_topology = %s" % _q(topology),
        "utils.tpu_mesh_shape.model_parallelism = %d" %
        self.model_parallelism,
        "utils.run.layout_rules = %s" % _q(mesh_defaults.layout_rules()),
    ]
    # A TPU's name is looked up in the zone and project; `local` is not.
    named = self.tpu != tpu_checks.LOCAL
    return commands.tpu(
        model_dir, tpu_name=self.tpu,
        gcp_project=self.gcp_project if named else None,
        zone=self.zone if named else None,
        logical_cores_per_chip=logical_cores_per_chip,
        tfds_data_dir=self.tfds_data_dir,
        gin_files=gin_files,
        gin_params=(list(gin_params) + mesh + self.attention_gin_params() +
                    list(self.extra_gin_params)))

  def attention_gin(self) -> str:
    """The variant's or baseline's gin file."""
    return self.attention.gin_file

  def attention_gin_params(self) -> List[str]:
    """The experiment's bindings for the job's baseline (none for a variant).

    Returns:
      e.g. ["LinformerAttention.k = 32"] for Linformer in Table 7.
    """
    if self.baseline is None:
      return []
    return list(self.exp.baseline_gin_params.get(self.baseline, ()))

  def model_gin(self) -> str:
    return experiments.MODEL_GIN[self.t5_version][self.model_size]

  def pretrain(self) -> commands.Command:
    """Trains from scratch: model size, experiment file, attention file."""
    return self._command(
        self.pretrain_dir,
        [self.model_gin(), self.exp.gin_file, self.attention_gin()],
        ["utils.run.train_steps = %d" % self.pretrain_steps])

  def finetune(self) -> commands.Command:
    """Continues from the last pretrained checkpoint (see module doc)."""
    return self._command(
        self.finetune_dir,
        # The attention after the operative config, which binds the stacks.
        ["%s/operative_config.gin" % self.pretrain_dir, self.attention_gin(),
         self.exp.finetune_gin_file],
        ["utils.run.init_checkpoint = %s" %
         _q("%s/model.ckpt-%d" % (self.pretrain_dir, self.pretrain_steps)),
         # Absolute: the pretrained global_step is restored.
         "utils.run.train_steps = %d" %
         (self.pretrain_steps + self.finetune_steps)])

  def _eval(self, model_dir: str, mixture: str, gin_file: str,
            lengths: tuple) -> commands.Command:
    return self._command(
        model_dir,
        ["%s/operative_config.gin" % model_dir, self.attention_gin(),
         gin_file],
        ["MIXTURE_NAME = %s" % _q(mixture),
         "utils.run.dataset_split = %s" % _q(self.exp.eval_split),
         "eval_checkpoint_step = 'all'", _lengths(lengths)]
        # The same examples at every checkpoint.
        + commands.eval_seed_params())

  def evals(self) -> List[commands.Command]:
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

  def commands(self, stage: str) -> List[commands.Command]:
    """The t5_mesh_transformer commands of a stage ("all": every stage).

    Args:
      stage: one of experiments.STAGES, or "all".

    Returns:
      The Commands, in the order they run.
    """
    if stage == "all":
      return [c for s in experiments.STAGES for c in self.commands(s)]
    if stage == "pretrain":
      return [self.pretrain()]
    if stage == "finetune":
      return [self.finetune()] if self.exp.finetune_mixture else []
    if stage == "eval":
      return self.evals()
    raise ValueError("Unknown stage %r" % stage)

  def create_tpu_command(self) -> List[str]:
    """The `gcloud` command that creates the TPU VM the job runs on.

    Returns:
      Its argv; the zone and project are the shell variables ${ZONE} and
      ${PROJECT} where not given (`dry_run_text` leaves them for the shell
      to expand).
    """
    accel = accelerator_type(self.tpu_topology, self.tpu_version)
    multi_host = mesh_defaults.num_hosts(self.tpu_topology,
                                         self.tpu_version) > 1
    return ["gcloud", "compute", "tpus", "tpu-vm", "create",
            self.vm_name,
            "--zone=%s" % (self.zone or "${ZONE}"),
            "--project=%s" % (self.gcp_project or "${PROJECT}"),
            "--accelerator-type=%s" % accel,
            "--version=%s" % (TPU_SOFTWARE % ("pod-" if multi_host else ""))]

  @property
  def vm_name(self) -> str:
    """The TPU VM's name: --tpu_vm_name, else synth-<accelerator type>."""
    return self.tpu_vm_name or "synth-" + accelerator_type(
        self.tpu_topology, self.tpu_version)

  def tensorboard_command(self) -> List[str]:
    return ["tensorboard", "--logdir=%s" % self.root_dir]

  def dry_run_text(self, stage: str) -> str:
    """What a dry run prints: the TPU, TensorBoard and stage commands.

    Args:
      stage: one of experiments.STAGES, or "all".

    Returns:
      Shell text with a comment before each command.
    """
    stage_commands = self.commands(stage)
    lines = ["# experiment %s (%s); %s; T5 %s %s; mesh %s" %
             (self.experiment, self.exp.paper,
              describe_attention(self.attention), self.t5_version,
              self.model_size, self.mesh_shape)]
    unset = [name for name, value in (("ZONE", self.zone),
                                      ("PROJECT", self.gcp_project))
             if not value]
    if unset:
      lines.append("# set %s first (--zone, --gcp_project print them in)" %
                   " and ".join("%s=..." % name for name in unset))
    lines += ["# create the TPU VM (then run this tool on it, --tpu=local):",
              _shell_expands(commands.format_command(
                  self.create_tpu_command())),
              "# prepare the data the commands read, once (docs/tpu.md, "
              "The data):",
              commands.format_command(self.prepare_data_command(stage)),
              "# watch training:",
              commands.format_command(self.tensorboard_command())]
    for i, command in enumerate(stage_commands):
      lines.append("# step %d of %d" % (i + 1, len(stage_commands)))
      lines.append(commands.format_command(command))
    return "\n".join(lines)

  def prepare_data_command(self, stage: str) -> List[str]:
    """The command that prepares the datasets a stage reads.

    Args:
      stage: one of experiments.STAGES, or "all".

    Returns:
      The argv of `mtf-synthesizer-data --prepare` for the stage's
      mixtures and the job's data folder.
    """
    return datasets.prepare_argv(self.mixtures(stage), self.tfds_data_dir)

  def preflight_argv(self, stage: str) -> List[str]:
    """The preflight of a stage's commands, as its own process runs it.

    It checks the topology and flag the commands give mesh
    (`mesh_defaults.mesh_topology`) and the datasets the stage reads.

    Args:
      stage: one of experiments.STAGES, or "all".

    Returns:
      The argv of `python -m mtf_synthesizer.jobs.preflight`.
    """
    topology, logical_cores_per_chip = mesh_defaults.mesh_topology(
        self.tpu_topology, self.tpu_version)
    generation = mesh_defaults.tpu_generation(self.tpu_topology,
                                              self.tpu_version)
    return preflight.argv_of(
        tpu=self.tpu, tpu_topology=topology, tpu_version=generation.name,
        logical_cores_per_chip=logical_cores_per_chip,
        data_dir=self.tfds_data_dir, mixtures=self.mixtures(stage))


def _shell_expands(text: str) -> str:
  """Shell text whose ${NAME} placeholders the shell expands when pasted."""
  return text.replace("\\${", "${")


def beside_interpreter(
    command: Union[commands.Command, Sequence[str]]
) -> Union[commands.Command, Sequence[str]]:
  """The command with the stock CLI of this interpreter's environment.

  A job's commands name the CLI bare (`commands.CLI_NAME`, as printed);
  run, they start the one installed beside `sys.executable`, whatever PATH
  holds (a virtualenv's `bin/` is on PATH only when it is activated).

  Args:
    command: a Command or an argv list.

  Returns:
    The command, its program the CLI's path where it named the CLI bare.
  """
  if (isinstance(command, commands.Command)
      and command.program == commands.CLI_NAME):
    return dataclasses.replace(command, program=commands.cli_path())
  return command


def run_commands(
    to_run: Sequence[Union[commands.Command, Sequence[str]]]) -> int:
  """Runs each command, streaming its output; stops at the first failure.

  A SIGTERM (a batch system's stop, a pre-emption of the VM running the
  tool) kills the command in progress and starts no other, so that no
  trainer writes on into the model directory that a restarted job resumes
  from; call it from the main thread.

  Args:
    to_run: Commands or argv lists.

  Returns:
    0; the exit status of the command that failed; or 128 + SIGTERM when
    the tool was stopped.
  """
  def echo(line):
    sys.stdout.write(line)
    sys.stdout.flush()

  with runner.sigterm_raises_stopped():
    for command in to_run:
      command = beside_interpreter(command)
      print("+ " + commands.format_command(command), flush=True)
      try:
        status = runner.run(command, on_line=echo).returncode
      except runner.Stopped:
        print("tpu_job: stopped by SIGTERM; the command in progress was "
              "killed. Run the same command again to resume from the "
              "model directory's last checkpoint.", file=sys.stderr)
        return 128 + signal.SIGTERM
      if status:
        print("tpu_job: command failed with status %d; stopping." % status,
              file=sys.stderr)
        return status
  return 0


def _table_attentions(
    table: str, variant_names: Optional[Sequence[str]] = None,
    baseline_names: Optional[Sequence[str]] = None) -> List[Dict[str, str]]:
  """The attentions of a table's jobs, as Job keyword arguments.

  Args:
    table: a key of experiments.TABLE_EXPERIMENTS.
    variant_names: variant names.
    baseline_names: baseline names.

  Returns:
    [{"variant": name}, ..., {"baseline": name}, ...]: the given variants
    and baselines; when neither is given, the variants and baselines the
    table reports (experiments.TABLE_VARIANTS, experiments.TABLE_BASELINES).

  Raises:
    ValueError: for an unknown table.
  """
  if table not in experiments.TABLE_EXPERIMENTS:
    raise ValueError("Unknown table %r; one of %s" %
                     (table, ", ".join(experiments.TABLE_EXPERIMENTS)))
  if variant_names is None and baseline_names is None:
    variant_names = experiments.TABLE_VARIANTS[table]
    baseline_names = experiments.TABLE_BASELINES[table]
  return ([{"variant": name} for name in variant_names or ()] +
          [{"baseline": name} for name in baseline_names or ()])


def table_commands(table: str, variant_names: Optional[Sequence[str]] = None,
                   baseline_names: Optional[Sequence[str]] = None, *,
                   model_size: str = "base",
                   tpu_topology: str = "2x2") -> List[str]:
  """The commands of one table, as shell text with a comment per job.

  They run on the TPU VM (`--tpu=local`); the bucket is the shell variable
  ${BUCKET}.

  Args:
    table: a key of experiments.TABLE_EXPERIMENTS.
    variant_names: variant names.
    baseline_names: baseline names. When neither these nor the variants are
      given: the variants and baselines the table reports.
    model_size: T5 model size (the paper: base).
    tpu_topology: TPU topology (the paper's Table 4: 2x2 TPU v3).

  Returns:
    Lines of shell text.

  Raises:
    ValueError: for a job that cannot be run, e.g. a non-causal baseline in
      a table with a language model (see `Job.check_causal`).
  """
  lines = []
  for experiment in experiments.TABLE_EXPERIMENTS[table]:
    for attention in _table_attentions(table, variant_names, baseline_names):
      job = Job(bucket="gs://${BUCKET}", tpu_topology=tpu_topology,
                model_size=model_size, experiment=experiment, **attention)
      lines.append("# %s, %s" % (job.exp.paper,
                                 describe_attention(job.attention)))
      stage = experiments.TABLE_STAGES.get(table, "all")
      for command in job.commands(stage):
        # The placeholders are for the shell to expand (in double quotes).
        lines.append(_shell_expands(commands.format_command(command)))
  return lines
