# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""`--module_import=workbench.resource_variables`: the CLI's steps as written.

The stock `t5_mesh_transformer` turns TF 2's behavior off before it imports
its `--module_import`s, so mesh's variables are TF 1's reference variables.
On a CPU a step then reads a variable's buffer wherever an op runs, and
Adafactor updates it in place while the step's backward pass may still be
reading it: some gradients of a step see weights this step already
updated, the more so the more threads, and the losses change from one run
to the next (1e-5 relative within 20 steps of a tiny model) and drift from
the step's own arithmetic (1e-3 by step 20). Imported by the CLI, this
module turns resource variables back on: every read of a step is a snapshot
taken before that step's updates, so the CLI computes what its graph says
(the gradients of the step's loss at the step's weights; the optimizer at
the step's global step) and runs repeat exactly.
"""

import tensorflow.compat.v1 as tf

tf.enable_resource_variables()
