# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
"""One training step and one evaluation step, jit-compiled over the mesh.

The train state (step, parameters, optimizer state) is sharded as
`partitioning` places it; a batch is split over the `data` axis. The loss
is mesh's (`flax_model.losses.loss`: cross entropy plus z_loss (log Z)^2
at the positions whose target is not 0, divided by batch x length unless a
`loss_denominator` is bound); dropout's random bits are drawn from the
seed and the step, so that a resumed run draws the same ones.

Batches are dicts of int32 [batch, length] arrays named as seqio's feature
converters name them: `encoder_input_tokens` (encoder-decoders),
`decoder_input_tokens` (the targets shifted right, 0 first) and
`decoder_target_tokens` (0 at padding).
"""

import dataclasses
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from mtf_synthesizer.flax_model import functions
from mtf_synthesizer.flax_model import losses
from mtf_synthesizer.flax_model import mesh_checkpoint
from mtf_synthesizer.flax_model import t5
from mtf_synthesizer.flax_train import partitioning

Array = jax.Array
Batch = Mapping[str, Any]

ENCODER_INPUTS = "encoder_input_tokens"
DECODER_INPUTS = "decoder_input_tokens"
TARGETS = "decoder_target_tokens"


@flax.struct.dataclass
class TrainState:
  """What a training step reads and writes, and a checkpoint holds.

  Attributes:
    step: the updates applied so far (int32 scalar).
    params: the model's parameters.
    opt_state: the optimizer's state.
  """
  step: Array
  params: Any
  opt_state: Any


def feature_names(model: nn.Module) -> Tuple[str, ...]:
  """The batch features the model reads (seqio's converters' names)."""
  if isinstance(model, t5.EncoderDecoder):
    return (ENCODER_INPUTS, DECODER_INPUTS, TARGETS)
  return (DECODER_INPUTS, TARGETS)


def logits(model: nn.Module, params: Any, batch: Batch,
           enable_dropout: bool = False,
           dropout_rng: Optional[Array] = None) -> Array:
  """Teacher-forced logits [batch, length, vocab] of a batch.

  Args:
    model: an EncoderDecoder or a DecoderOnly.
    params: its parameters.
    batch: the features (`feature_names`).
    enable_dropout: apply dropout.
    dropout_rng: dropout's key, when enabled.

  Returns:
    The logits.
  """
  rngs = {"dropout": dropout_rng} if enable_dropout else None
  variables = {"params": params}
  if isinstance(model, t5.EncoderDecoder):
    return model.apply(variables, batch[ENCODER_INPUTS],
                       batch[DECODER_INPUTS], enable_dropout=enable_dropout,
                       rngs=rngs)
  return model.apply(variables, batch[DECODER_INPUTS],
                     enable_dropout=enable_dropout, rngs=rngs)


@dataclasses.dataclass
class Trainer:
  """The model, its optimizer and the mesh, with compiled steps.

  Attributes:
    model: an EncoderDecoder or a DecoderOnly (unbound).
    optimizer: the optax transformation (`optimizer.AdafactorOptimizer`).
    mesh: the (data, model) device mesh.
    z_loss: mesh's `Unitransformer.z_loss`.
    loss_denominator: mesh's; None: batch x length.
    dropout_seed: the seed of dropout's random bits.
    rules: logical axis name -> mesh axis.
  """
  model: nn.Module
  optimizer: optax.GradientTransformation
  mesh: jax.sharding.Mesh
  z_loss: float = 1e-4
  loss_denominator: Optional[float] = None
  dropout_seed: int = 0
  rules: Tuple[Tuple[str, Any], ...] = partitioning.LOGICAL_AXIS_RULES

  def __post_init__(self):
    boxed = jax.eval_shape(lambda: self.model.init(
        jax.random.PRNGKey(0), *mesh_checkpoint.dummy_inputs(self.model),
        enable_dropout=False)["params"])
    self.abstract_params = nn.unbox(boxed)
    # Fix's table is never trained (mesh: not a trainable variable).
    self.optimizer = optax.multi_transform(
        {"trained": self.optimizer, "frozen": optax.set_to_zero()},
        lambda params: jax.tree.map(
            lambda trained: "trained" if trained else "frozen",
            functions.trainable_mask(params)))
    self.params_shardings = partitioning.param_shardings(
        boxed, self.mesh, self.rules)
    abstract_opt = jax.eval_shape(self.optimizer.init, self.abstract_params)
    self.state_shardings = TrainState(
        step=NamedSharding(self.mesh, P()),
        params=self.params_shardings,
        opt_state=partitioning.optimizer_shardings(
            abstract_opt, self.abstract_params, self.params_shardings,
            self.mesh))
    self.abstract_state = jax.tree.map(
        lambda leaf, sharding: jax.ShapeDtypeStruct(
            leaf.shape, leaf.dtype, sharding=sharding),
        TrainState(jax.ShapeDtypeStruct((), jnp.int32),
                   self.abstract_params, abstract_opt),
        self.state_shardings)
    self.batch_sharding = NamedSharding(self.mesh, P(partitioning.DATA))
    self._train_step = jax.jit(
        self._train_step_fn, in_shardings=(self.state_shardings, None),
        out_shardings=(self.state_shardings, None), donate_argnums=(0,))
    self._eval_step = jax.jit(self._eval_step_fn,
                              in_shardings=(self.params_shardings, None))

  # --- state -----------------------------------------------------------------

  def init_state(self, params: Optional[Any] = None,
                 seed: int = 0) -> TrainState:
    """Step 0's state, sharded: given parameters or freshly drawn ones.

    Args:
      params: the parameters (host arrays, e.g. read from a mesh
        checkpoint); None: drawn by the model's initializers.
      seed: the initializers' seed, when drawn.

    Returns:
      The TrainState.
    """
    if params is None:
      init = jax.jit(lambda key: nn.unbox(self.model.init(
          key, *mesh_checkpoint.dummy_inputs(self.model),
          enable_dropout=False)["params"]),
                     out_shardings=self.params_shardings)
      params = init(jax.random.PRNGKey(seed))
    else:
      params = jax.tree.map(
          lambda value, want, sharding: _put(np.asarray(value, want.dtype),
                                             sharding),
          params, self.abstract_params, self.params_shardings)
    opt_state = jax.jit(self.optimizer.init,
                        out_shardings=self.state_shardings.opt_state)(params)
    step = jax.device_put(jnp.zeros((), jnp.int32), self.state_shardings.step)
    return TrainState(step, params, opt_state)

  def global_batch(self, batch: Mapping[str, np.ndarray]) -> Dict[str, Array]:
    """This host's rows of the batch as global arrays split over `data`.

    Args:
      batch: feature -> this process's rows [local batch, length].

    Returns:
      feature -> the global [batch, length] array.

    Raises:
      ValueError: a batch that the data axis does not divide.
    """
    out = {}
    ways = self.mesh.shape[partitioning.DATA]
    for name in feature_names(self.model):
      local = np.asarray(batch[name], np.int32)
      rows = local.shape[0] * jax.process_count()
      if rows % ways:
        raise ValueError(
            "a batch of %d sequences does not divide over the %d devices "
            "of the mesh's data axis" % (rows, ways))
      out[name] = jax.make_array_from_process_local_data(
          self.batch_sharding, local, (rows,) + local.shape[1:])
    return out

  # --- steps -----------------------------------------------------------------

  def _loss_fn(self, params, batch, dropout_rng):
    out = logits(self.model, params, batch,
                 enable_dropout=self._dropout_enabled(),
                 dropout_rng=dropout_rng)
    return losses.loss(out, batch[TARGETS], self.z_loss, True,
                       self.loss_denominator)

  def _dropout_enabled(self) -> bool:
    config = self.model.config
    return bool(config.dropout_rate or config.attention_dropout_rate)

  def loss_and_grads(self, params: Any, batch: Batch, step: Array
                     ) -> Tuple[Array, Any]:
    """The training loss of a batch and its gradients (traceable).

    What a training step differentiates: dropout (if the model has any)
    draws its bits from `dropout_seed` and the step.

    Args:
      params: the parameters.
      batch: a batch (`feature_names`).
      step: the updates applied so far (the state's step).

    Returns:
      (the loss, the gradients: a tree of the parameters' structure).
    """
    rng = jax.random.fold_in(jax.random.PRNGKey(self.dropout_seed), step)
    return jax.value_and_grad(self._loss_fn)(params, batch, rng)

  def apply_gradients(self, state: TrainState, grads: Any) -> TrainState:
    """The state after the optimizer's update by `grads` (traceable).

    Args:
      state: the current state.
      grads: the gradients (`loss_and_grads`).

    Returns:
      The next state: step + 1, updated parameters and optimizer state.
    """
    updates, opt_state = self.optimizer.update(grads, state.opt_state,
                                               state.params)
    params = optax.apply_updates(state.params, updates)
    return TrainState(state.step + 1, params, opt_state)

  def _train_step_fn(self, state: TrainState, batch: Batch
                     ) -> Tuple[TrainState, Dict[str, Array]]:
    loss, grads = self.loss_and_grads(state.params, batch, state.step)
    metrics = {"loss": loss, "grad_norm": optax.tree.norm(grads)}
    return self.apply_gradients(state, grads), metrics

  def train_step(self, state: TrainState, batch: Batch
                 ) -> Tuple[TrainState, Dict[str, Array]]:
    """One update: (the new state, {"loss", "grad_norm"} of this batch).

    The state passed in is donated (its buffers are reused).

    Args:
      state: the current state.
      batch: a global batch (`global_batch`).

    Returns:
      (the state after the update, the step's metrics before it).
    """
    return self._train_step(state, batch)

  def _eval_step_fn(self, params, batch):
    out = logits(self.model, params, batch)
    return losses.eval_metrics(out, batch[TARGETS], self.loss_denominator)

  def eval_step(self, params: Any, batch: Batch) -> Dict[str, Array]:
    """The teacher-forced eval metrics of one batch (`losses.eval_metrics`).

    Args:
      params: the parameters (sharded as the state's).
      batch: a global batch.

    Returns:
      The batch's metrics: "loss", "neg_log_perplexity", "token_accuracy",
      "sequence_accuracy".
    """
    return self._eval_step(params, batch)


def _put(value: np.ndarray, sharding: NamedSharding) -> Array:
  """A host array (the same on every process) as a sharded global array."""
  return jax.make_array_from_callback(value.shape, sharding,
                                      lambda index: value[index])
