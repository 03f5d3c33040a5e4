"""Every zoo module inside a Flax NNX model, with the parameter tree of its linen form.

The zoo's modules are linen modules; Flax's bridge (`flax.nnx.bridge.ToNNX`) turns any of them
into an `nnx.Module` whose parameters are `nnx.Param`s, laid out exactly as the linen module's
`params` collection (`nnx.state(m, nnx.Param)` has the paths of `module.init(...)['params']`), so
`nnx.jit`, `nnx.grad` and `nnx.Optimizer` see and update them with the rest of an NNX model. This
module is the one way the zoo does it:

  wrap(module, *sample_args, rngs=nnx.Rngs(0), **sample_kwargs)   a wrapped module, initialized
        from sample inputs, as linen's init is (call it as the linen module is applied:
        `wrapped(*args, **kwargs)`, its methods as `wrapped.method_name(...)`)
  from_linen(module, variables)   a wrapped module holding given linen variables (a trained
        run's parameters, say), computing exactly what `module.apply(variables, ...)` computes
  linen_variables(wrapped)   its variables back in linen's form, {'params': ...}, for
        `module.apply` and for the checkpoints and tools that read linen trees

Dropout draws from the `dropout` stream of the `rngs` given to `wrap`
(`nnx.Rngs(0, dropout=1)`), or of the `rngs=` of a call. Import it as `import zoo.nnx` (its
name is flax's module's, so `from zoo import nnx` would shadow `flax.nnx` in the caller).
"""

from __future__ import annotations

from typing import Any, Mapping

import flax.linen as nn
from flax import nnx
from flax.nnx import bridge
from flax.nnx.bridge import variables as bridge_variables

_BRIDGE_ATTRIBUTES = ("to_nnx__", "_pytree__")  # ToNNX's own attributes, not linen variables


def wrap(module: nn.Module, *sample_args: Any, rngs: nnx.Rngs, **sample_kwargs: Any
         ) -> bridge.ToNNX:
  """`module` as an NNX module, its variables created by running it on sample inputs.

  Args:
    module: a zoo (or any linen) module, unbound.
    *sample_args: inputs of one call of the module, as `module.init` takes them (shapes are what
      matter: the parameters' shapes follow from them).
    rngs: the streams that initialize the parameters (`params`, or the default stream) and later
      drive dropout (`dropout`).
    **sample_kwargs: keyword arguments of that call.

  Returns:
    bridge.ToNNX holding the module's variables as NNX state (`nnx.Param` for `params`).
  """
  if not isinstance(module, nn.Module):
    raise TypeError(f"module: expected a flax.linen Module, got {type(module).__name__}")
  if not isinstance(rngs, nnx.Rngs):
    raise TypeError(f"rngs: expected flax.nnx.Rngs, got {type(rngs).__name__}")
  wrapped = bridge.ToNNX(module, rngs=rngs)
  bridge.lazy_init(wrapped, *sample_args, **sample_kwargs)
  return wrapped


def linen_variables(wrapped: bridge.ToNNX) -> dict[str, Any]:
  """The variables of a wrapped module in linen's form: {'params': {...}, ...}, the tree that
  `wrapped.to_nnx__module.apply` takes (the current values, as plain arrays); {} for a module
  without variables (zoo.DotScore, say)."""
  if not isinstance(wrapped, bridge.ToNNX):
    raise TypeError(f"wrapped: expected a module made by zoo.nnx.wrap or from_linen, got "
                    f"{type(wrapped).__name__}")
  attributes = {name: value for name, value in vars(wrapped).items()
                if not name.startswith(_BRIDGE_ATTRIBUTES)}
  return bridge_variables.nnx_attrs_to_linen_vars(attributes)


def from_linen(module: nn.Module, variables: Any, *, rngs: nnx.Rngs | None = None
               ) -> bridge.ToNNX:
  """`module` as an NNX module holding `variables`, linen's {'params': ...} tree of that module
  (from `module.init`, or a trained run; {} for a module without variables); `rngs` drives
  dropout (none needed without it)."""
  if not isinstance(module, nn.Module):
    raise TypeError(f"module: expected a flax.linen Module, got {type(module).__name__}")
  if not isinstance(variables, Mapping) or not all(
      isinstance(tree, Mapping) for tree in variables.values()):
    raise ValueError("variables: expected linen's variables, a mapping of collections "
                     "({'params': {...}}, as module.init returns them)")
  wrapped = bridge.ToNNX(module, rngs=rngs)
  for name, value in bridge_variables.linen_vars_to_nnx_attrs(dict(variables)).items():
    setattr(wrapped, name, nnx.data(value))
  return wrapped
