# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Install script for mtf_synthesizer."""

import glob
import os

import setuptools
from setuptools.command import build_py

_PTH = "mtf_synthesizer.pth"
# The top-level gin/ folder is installed as mtf_synthesizer/gin/.
_GIN_FILES = sorted(glob.glob(os.path.join("gin", "**", "*.gin"),
                              recursive=True))


class BuildPyWithPth(build_py.build_py):
  """Also ships the start-up hook file and the gin files."""

  def _extra_files(self):
    yield _PTH, os.path.join(self.build_lib, _PTH)
    for path in _GIN_FILES:
      yield path, os.path.join(self.build_lib, "mtf_synthesizer", path)

  def run(self):
    super().run()
    for source, target in self._extra_files():
      self.mkpath(os.path.dirname(target))
      self.copy_file(source, target)

  def get_outputs(self, include_bytecode=True):
    return super().get_outputs(include_bytecode) + [
        target for _, target in self._extra_files()]


setuptools.setup(
    name="mtf_synthesizer",
    version="0.1.0",
    description=("Synthesizer attention (Tay et al.) for Mesh TensorFlow and "
                 "T5, with T5 tasks for the paper's experiments."),
    license="Apache 2.0",
    python_requires=">=3.9,<3.12",
    packages=setuptools.find_packages(include=["mtf_synthesizer*",
                                               "t5_tasks*"]),
    py_modules=["_mtf_synthesizer_hooks", "_mtf_synthesizer_commands"],
    cmdclass={"build_py": BuildPyWithPth},
    install_requires=[
        "mesh-tensorflow==0.1.21",
        "t5==0.9.4",
        "tensorflow>=2.12,<2.16",
        "gin-config",
        "pycocoevalcap==1.2",  # PersonaChat's METEOR 1.5 and CIDEr-D
        "seqio-nightly",
        "tfds-nightly",
    ],
    # The user's commands (mtf_synthesizer/commands/); those that start
    # without TensorFlow through _mtf_synthesizer_commands.
    entry_points={"console_scripts": [
        "mtf-synthesizer-export-hf=_mtf_synthesizer_commands:export_hf",
        "mtf-synthesizer-from-t5=_mtf_synthesizer_commands:from_t5",
        "mtf-synthesizer-tpu-job=mtf_synthesizer.commands.tpu_job:main",
        "mtf-synthesizer-data=mtf_synthesizer.commands.data:main",
        "mtf-synthesizer-convert-release-checkpoint="
        "mtf_synthesizer.commands.convert_release_checkpoint:main",
        "mtf-synthesizer-flax-from-mesh="
        "mtf_synthesizer.commands.flax_from_mesh:main",
        "mtf-synthesizer-jax-train=mtf_synthesizer.commands.jax_train:main",
    ]},
    # Loading a model that mtf-synthesizer-export-hf wrote, in PyTorch
    # (transformers and safetensors come with t5).
    extras_require={"torch": ["torch>=2.1"]},
)
