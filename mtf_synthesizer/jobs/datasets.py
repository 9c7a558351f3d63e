# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""The TFDS datasets a job's mixtures read, where they lie, how to make them.

Every task of `t5_tasks` (and the t5 tasks it reuses) reads a TFDS dataset
at a pinned version, e.g. `glue/rte:1.0.0` or `c4/en:3.1.0`. With
`--t5_tfds_data_dir=DIR` (every Cloud TPU command has it) seqio reads each
of them from DIR (`seqio.set_tfds_data_dir_override`), as
`DIR/<name>/<config>/<version>/`. seqio's TFDS sources load with
`download=True`: a dataset missing from DIR would be downloaded and built
by the training job itself, on the TPU VM. So a job checks, before its
first command, that every dataset its stages read is prepared in DIR
(`missing`), and a missing one is one line that names the command that
prepares it (`mtf-synthesizer-data --prepare`, which runs TFDS's own
`download_and_prepare` for each, or prints the Beam command for C4).

The names come from the task registry itself (`tfds_names`), never from a
second list, so what is checked and prepared is what the tasks read.
Everything that touches TFDS or the registry imports TensorFlow; this
module itself does not, so the TPU job tool can import it.
"""

import dataclasses
from typing import Callable, Iterable, List, Optional

# TFDS's builder of C4 runs on Apache Beam. t5's README: preparing it
# downloads the raw Common Crawl scrapes (about 7 TB) and takes about 335
# CPU-days, which it suggests running on Cloud Dataflow.
BEAM_NOTE = (
    "built with Apache Beam: about 7 TB of Common Crawl downloads and about "
    "335 CPU-days (t5's README), best on Cloud Dataflow")


@dataclasses.dataclass(frozen=True)
class Dataset:
  """One TFDS dataset a job reads.

  Attributes:
    name: `name[/config]:version`, as the task reads it.
    beam: whether TFDS builds it with Apache Beam (C4).
  """
  name: str
  beam: bool = False


def tfds_names(mixture_names: Iterable[str]) -> List[str]:
  """The TFDS datasets the given mixtures and tasks read, from the registry.

  Imports `t5_tasks` (TensorFlow, seqio).

  Args:
    mixture_names: names of `t5_tasks` mixtures or tasks.

  Returns:
    `name[/config]:version` of every TFDS source, sorted, each once.

  Raises:
    ValueError: for a name seqio does not know.
  """
  import seqio  # pylint: disable=g-import-not-at-top
  import t5_tasks  # pylint: disable=g-import-not-at-top,unused-import
  names = set()
  for mixture_name in mixture_names:
    try:
      provider = seqio.get_mixture_or_task(mixture_name)
    except ValueError as e:
      raise ValueError("Unknown mixture or task %r: %s" %
                       (mixture_name, e)) from None
    tasks = (provider.tasks if isinstance(provider, seqio.Mixture)
             else [provider])
    for task in tasks:
      if isinstance(task.source, seqio.TfdsDataSource):
        names.add(task.source.tfds_dataset.name)
  return sorted(names)


def datasets(mixture_names: Iterable[str]) -> List[Dataset]:
  """The datasets the mixtures read, each marked when Beam builds it.

  Args:
    mixture_names: names of `t5_tasks` mixtures or tasks.

  Returns:
    The Datasets, sorted by name.
  """
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  found = []
  for name in tfds_names(mixture_names):
    builder_cls = tfds.builder_cls(name.split("/")[0].split(":")[0])
    found.append(Dataset(name, issubclass(builder_cls,
                                          tfds.core.BeamBasedBuilder)))
  return found


def data_path(name: str, data_dir: str) -> str:
  """Where TFDS keeps a prepared dataset: DIR/<name>/<config>/<version>.

  Args:
    name: `name[/config]:version`.
    data_dir: the TFDS data folder (local or gs://).

  Returns:
    The dataset's folder.
  """
  base, _, version = name.partition(":")
  return "/".join([data_dir.rstrip("/"), base, version])


def is_prepared(name: str, data_dir: str) -> bool:
  """Whether the dataset is prepared in data_dir: its `dataset_info.json`.

  TFDS writes that file last when it prepares a dataset, and reads it first
  when it loads one.

  Args:
    name: `name[/config]:version`.
    data_dir: the TFDS data folder (local or gs://).

  Returns:
    True when `data_path(name, data_dir)/dataset_info.json` exists.
  """
  from etils import epath  # pylint: disable=g-import-not-at-top
  return (epath.Path(data_path(name, data_dir)) / "dataset_info.json").exists()


def missing(names: Iterable[str], data_dir: str,
            prepared: Callable[[str, str], bool] = is_prepared) -> List[str]:
  """The datasets that data_dir lacks.

  Args:
    names: `name[/config]:version` of each.
    data_dir: the TFDS data folder.
    prepared: whether one is prepared there.

  Returns:
    The names not prepared, in the order given.
  """
  return [name for name in names if not prepared(name, data_dir)]


def prepare_argv(mixture_names: Iterable[str], data_dir: str) -> List[str]:
  """The command that prepares the mixtures' datasets in data_dir.

  Args:
    mixture_names: names of `t5_tasks` mixtures or tasks.
    data_dir: the TFDS data folder.

  Returns:
    The argv of `mtf-synthesizer-data --prepare`.
  """
  return (["mtf-synthesizer-data", "--prepare", "--data_dir=%s" % data_dir] +
          ["--mixture=%s" % name for name in mixture_names])


def tfds_build_argv(dataset: Dataset, data_dir: str,
                    beam_options: Optional[str] = None) -> List[str]:
  """TFDS's own command that builds one dataset at its version.

  Args:
    dataset: the Dataset.
    data_dir: the TFDS data folder.
    beam_options: `--beam_pipeline_options` for a Beam dataset; a Dataflow
      template with shell variables when not given.

  Returns:
    The argv of `tfds build`.
  """
  argv = ["tfds", "build", dataset.name, "--data_dir=%s" % data_dir]
  if dataset.beam:
    bucket = data_dir.rsplit("/", 1)[0]
    argv.append("--beam_pipeline_options=%s" % (beam_options or (
        "runner=DataflowRunner,project=${PROJECT},region=${REGION},"
        "job_name=tfds-%s,staging_location=%s/beam/staging,"
        "temp_location=%s/beam/temp,requirements_file=beam_requirements.txt"
        % (dataset.name.split("/")[0].split(":")[0], bucket, bucket))))
  return argv
