# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""Install script for mtf_synthesizer."""

import os

import setuptools
from setuptools.command import build_py

_PTH = "mtf_synthesizer.pth"


class BuildPyWithPth(build_py.build_py):
  """Also ships the start-up hook file at the root of site-packages."""

  def run(self):
    super().run()
    self.copy_file(_PTH, os.path.join(self.build_lib, _PTH))

  def get_outputs(self, include_bytecode=True):
    return super().get_outputs(include_bytecode) + [
        os.path.join(self.build_lib, _PTH)]


setuptools.setup(
    name="mtf_synthesizer",
    version="0.1.0",
    description=("Synthesizer attention (Tay et al.) for Mesh TensorFlow and "
                 "T5, with T5 tasks for the paper's experiments."),
    license="Apache 2.0",
    python_requires=">=3.9,<3.12",
    packages=setuptools.find_packages(include=["mtf_synthesizer*",
                                               "t5_tasks*"]),
    py_modules=["_mtf_synthesizer_hooks"],
    package_data={"mtf_synthesizer": ["gin/*.gin", "gin/*/*.gin"]},
    cmdclass={"build_py": BuildPyWithPth},
    install_requires=[
        "mesh-tensorflow==0.1.21",
        "t5==0.9.4",
        "tensorflow>=2.12,<2.16",
        "gin-config",
        "seqio-nightly",
        "tfds-nightly",
    ],
)
