"""Typed run configurations and command-line overrides.

A run is described by a `Config`: the engine's own settings (`train`, `optimizer`) plus two slots
an experiment fills with its own dataclasses (`model`, `data`). Each named run (an experiment and a
model name) is a function returning a `Config`; its docstring says how to run it and what it
reached.

Overrides address a field by its dotted path, `optimizer.learning_rate=3e-4`, by its bare name when
that name is unique across the whole config (`learning_rate=3e-4`), or by an alias (`lr`, `epochs`,
`steps`). Values are parsed to the type the field is declared with (int, float, bool, str, Literal
choices, `X | None`, tuples); an unknown or ambiguous key raises a ValueError that lists the valid
keys.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import types
import typing
from typing import Any, Iterable, Literal, Mapping

import jax.numpy as jnp

_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}


@dataclasses.dataclass
class OptimizerConfig:
  """The optax optimizer and learning-rate schedule (see `train_state.make_optimizer`).

  Attributes:
    name: 'adam', 'adamw' (decoupled weight decay) or 'sgd' (with `momentum`).
    learning_rate: the peak learning rate, reached at the end of the warm-up.
    b1: Adam's first-moment decay.
    b2: Adam's second-moment decay.
    eps: Adam's epsilon.
    weight_decay: decoupled weight decay for 'adamw' (ignored by the others).
    momentum: momentum for 'sgd' (0 = plain gradient descent).
    grad_clip_norm: clip gradients to this global norm before the update; None = no clipping.
    schedule: after the warm-up, 'constant', 'cosine' (to `min_lr_ratio` * learning_rate over
      `decay_steps`) or 'rsqrt' (learning_rate * sqrt(warmup_steps / step), the Transformer's
      decay).
    warmup_steps: linear warm-up from 0 over this many steps (0 = none).
    decay_steps: length of the cosine decay after the warm-up; None = until the last step.
    min_lr_ratio: the cosine schedule's final learning rate as a fraction of `learning_rate`.
  """
  name: Literal["adam", "adamw", "sgd"] = "adam"
  learning_rate: float = 1e-3
  b1: float = 0.9
  b2: float = 0.999
  eps: float = 1e-8
  weight_decay: float = 0.0
  momentum: float = 0.0
  grad_clip_norm: float | None = None
  schedule: Literal["constant", "cosine", "rsqrt"] = "constant"
  warmup_steps: int = 0
  decay_steps: int | None = None
  min_lr_ratio: float = 0.0


@dataclasses.dataclass
class TrainConfig:
  """How long to train, how often to log, evaluate and save, and in which precision.

  Attributes:
    seed: seeds parameter initialisation, dropout (folded with the step) and the data order.
    batch_size: global training batch size (split over all devices; must be a multiple of their
      number).
    eval_batch_size: evaluation batch size; None = `batch_size`.
    num_epochs: epochs to train; ignored when `num_steps` is set.
    num_steps: total optimizer steps; None = `num_epochs` * the task's steps per epoch.
    log_every: steps between reading training metrics from the device and logging them.
    eval_every: steps between dev evaluations; None = only at the end of each epoch.
    checkpoint_every: steps between periodic checkpoints (a checkpoint is also written at the end of
      every epoch, at the last step and when a stop signal arrives).
    keep_checkpoints: how many of the latest checkpoints to keep (the best one is kept apart).
    best_metric: the dev metric that selects the best checkpoint, e.g. 'dev/accuracy'.
    best_mode: 'max' or 'min': whether a larger or smaller `best_metric` is better.
    test_with: which parameters the final test evaluation uses: 'best' (falls back to the last
      parameters when no best checkpoint exists) or 'last'.
    dtype: computation dtype of the model; 'bfloat16' gives mixed precision (parameters stay in
      `param_dtype`, losses are computed in float32).
    param_dtype: storage dtype of the parameters and the optimizer state.
    prefetch: batches put on the device ahead of the running step.
    progress_bar: show a tqdm progress bar on the console.
  """
  seed: int = 0
  batch_size: int = 128
  eval_batch_size: int | None = None
  num_epochs: int = 2
  num_steps: int | None = None
  log_every: int = 50
  eval_every: int | None = None
  checkpoint_every: int = 1000
  keep_checkpoints: int = 2
  best_metric: str = "dev/loss"
  best_mode: Literal["max", "min"] = "min"
  test_with: Literal["best", "last"] = "best"
  dtype: Literal["float32", "bfloat16", "float16"] = "float32"
  param_dtype: Literal["float32", "bfloat16"] = "float32"
  prefetch: int = 2
  progress_bar: bool = True


@dataclasses.dataclass
class Config:
  """Everything that defines a run.

  Attributes:
    experiment: the registered experiment name, e.g. 'sentiment'.
    model_name: the registered model (named run) within the experiment, e.g. 'bilstm_additive'.
    data_dir: the raw or prepared data; None = the small sample shipped with the package.
    train: the engine's training settings.
    optimizer: the optimizer and schedule.
    model: the experiment's model hyperparameters (a dataclass of its own), or None.
    data: the experiment's data settings (a dataclass of its own: maximum length, vocabulary ...).
  """
  experiment: str = ""
  model_name: str = ""
  data_dir: str | None = None
  train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
  optimizer: OptimizerConfig = dataclasses.field(default_factory=OptimizerConfig)
  model: Any = None
  data: Any = None

  @property
  def compute_dtype(self):
    """The jnp dtype for the model's computation (`train.dtype`)."""
    return _DTYPES[self.train.dtype]

  @property
  def storage_dtype(self):
    """The jnp dtype for the parameters (`train.param_dtype`)."""
    return _DTYPES[self.train.param_dtype]


# --------------------------------------------------------------------------------------------------
# Walking a config: every settable leaf is a dotted path to a field that is not itself a dataclass.


def _field_types(obj) -> dict[str, Any]:
  return typing.get_type_hints(type(obj))


def leaf_paths(cfg) -> list[str]:
  """All settable dotted paths of `cfg`, in declaration order."""
  paths = []
  for field in dataclasses.fields(cfg):
    value = getattr(cfg, field.name)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
      paths.extend(f"{field.name}.{sub}" for sub in leaf_paths(value))
    else:
      paths.append(field.name)
  return paths


# Short names people type anyway; used when the config has no field of that name.
ALIASES = {"lr": "optimizer.learning_rate", "epochs": "train.num_epochs",
           "steps": "train.num_steps"}


def _resolve(cfg, key: str) -> str:
  """Turns a dotted path, a unique bare field name or an alias into a full dotted path."""
  paths = leaf_paths(cfg)
  if key in paths:
    return key
  if "." not in key and key in ALIASES and not any(p.endswith("." + key) for p in paths):
    return ALIASES[key]
  if "." not in key:
    matches = [p for p in paths if p.rsplit(".", 1)[-1] == key]
    if len(matches) == 1:
      return matches[0]
    if len(matches) > 1:
      raise ValueError(f"config key {key!r} is ambiguous; write one of: {', '.join(matches)}")
  # Suggest fields of the same section whose names are spelled alike ('widht' -> 'width').
  section, _, leaf = key.rpartition(".")
  names = [p for p in paths if p.rpartition(".")[0] == section or not section]
  close = difflib.get_close_matches(leaf, [p.rpartition(".")[2] for p in names], n=3, cutoff=0.75)
  close = [p for p in names if p.rpartition(".")[2] in close]
  hint = f" (did you mean {' or '.join(close)}?)" if close else ""
  raise ValueError(f"unknown config key {key!r}{hint}; valid keys are: {', '.join(paths)}")


def _is_union(tp) -> bool:
  return typing.get_origin(tp) in (typing.Union, types.UnionType)


def parse_value(text: str, tp, key: str = "value"):
  """Parses command-line `text` to the declared type `tp`.

  Handles bool ('true/false/yes/no/1/0'), int, float, str, Literal choices, optional types ('none'
  or 'null' give None), tuples ('a,b,c') and Any (a JSON value if `text` parses as one, else the
  string). Raises ValueError naming `key` when the text does not fit.
  """
  if _is_union(tp):
    args = typing.get_args(tp)
    if type(None) in args and text.strip().lower() in ("none", "null"):
      return None
    errors = []
    for arg in args:
      if arg is type(None):
        continue
      try:
        return parse_value(text, arg, key)
      except ValueError as e:
        errors.append(str(e))
    raise ValueError("; ".join(errors))
  origin = typing.get_origin(tp)
  if origin is Literal:
    choices = typing.get_args(tp)
    for choice in choices:
      if text == str(choice):
        return choice
    raise ValueError(f"{key}: {text!r} is not one of {', '.join(map(str, choices))}")
  if origin in (tuple, list):
    items = [t for t in (s.strip() for s in text.split(",")) if t]
    args = typing.get_args(tp)
    if origin is tuple and args and args[-1] is not Ellipsis:
      if len(items) != len(args):
        raise ValueError(f"{key}: expected {len(args)} comma-separated values, got {text!r}")
      return tuple(parse_value(s, a, key) for s, a in zip(items, args))
    item_type = args[0] if args else str
    return origin(parse_value(s, item_type, key) for s in items)
  if tp is bool:
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "1", "on"):
      return True
    if lowered in ("false", "no", "0", "off"):
      return False
    raise ValueError(f"{key}: expected a boolean (true/false), got {text!r}")
  if tp in (int, float):
    try:
      number = float(text)
    except ValueError:
      raise ValueError(f"{key}: expected {tp.__name__}, got {text!r}") from None
    if tp is float:
      return number
    if not number.is_integer():  # '1e3' is a fine int, '2.5' is not
      raise ValueError(f"{key}: expected int, got {text!r}")
    return int(number)
  if tp is str:
    return text
  if tp is Any:
    try:
      return json.loads(text)
    except json.JSONDecodeError:
      return text
  raise ValueError(f"{key}: cannot parse values of type {tp} from the command line")


def _set_path(cfg, path: str, make_value) -> None:
  *parents, name = path.split(".")
  owner = cfg
  for part in parents:
    owner = getattr(owner, part)
  tp = _field_types(owner)[name]
  setattr(owner, name, make_value(tp))


def override(cfg: Config, assignments: Iterable[str]):
  """Applies 'key=value' assignments to a deep copy of `cfg` and returns it.

  Args:
    cfg: any (nested) dataclass config.
    assignments: strings 'path=value'; the path is dotted ('optimizer.learning_rate') or a bare
      field name that is unique in the config ('learning_rate').

  Returns:
    A new config; `cfg` is left unchanged.

  Raises:
    ValueError: for a malformed assignment, an unknown or ambiguous key (listing the valid keys)
      or a value that does not parse to the field's type.
  """
  cfg = copy_config(cfg)
  for assignment in assignments:
    key, sep, text = assignment.partition("=")
    if not sep or not key.strip():
      raise ValueError(f"override {assignment!r} must look like key=value, e.g. "
                       "optimizer.learning_rate=3e-4")
    path = _resolve(cfg, key.strip())
    _set_path(cfg, path, lambda tp, p=path, t=text: parse_value(t, tp, p))
  return cfg


def copy_config(cfg):
  """A deep copy of a dataclass config (nested dataclasses are copied too)."""
  changes = {}
  for field in dataclasses.fields(cfg):
    value = getattr(cfg, field.name)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
      changes[field.name] = copy_config(value)
  return dataclasses.replace(cfg, **changes)


def to_dict(cfg) -> dict[str, Any]:
  """The config as plain JSON-ready data (tuples become lists)."""
  return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))


def _from_json_value(value, tp, key: str):
  """Converts a JSON value back to the declared type (lists to tuples, exact Literal checks)."""
  if value is None:
    return None
  if _is_union(tp):
    options = [a for a in typing.get_args(tp) if a is not type(None)]
    if len(options) == 1:
      return _from_json_value(value, options[0], key)
    return value
  origin = typing.get_origin(tp)
  if origin is tuple:
    args = typing.get_args(tp)
    if args and args[-1] is not Ellipsis:
      return tuple(_from_json_value(v, a, key) for v, a in zip(value, args))
    return tuple(_from_json_value(v, args[0] if args else Any, key) for v in value)
  if origin is Literal:
    if value not in typing.get_args(tp):
      raise ValueError(f"{key}: {value!r} is not one of {typing.get_args(tp)}")
    return value
  if tp is float and isinstance(value, int) and not isinstance(value, bool):
    return float(value)
  return value


def update_from_dict(cfg, values: Mapping[str, Any], prefix: str = ""):
  """Returns a copy of `cfg` with the entries of `values` (as written by `to_dict`) applied.

  Raises ValueError naming any key of `values` that `cfg` does not have.
  """
  cfg = copy_config(cfg)
  types_ = _field_types(cfg)
  names = [f.name for f in dataclasses.fields(cfg)]
  for name, value in values.items():
    path = f"{prefix}{name}"
    if name not in names:
      raise ValueError(f"unknown config key {path!r}; valid keys here are: {', '.join(names)}")
    current = getattr(cfg, name)
    if dataclasses.is_dataclass(current) and not isinstance(current, type):
      if not isinstance(value, Mapping):
        raise ValueError(f"{path}: expected a mapping of its fields, got {value!r}")
      setattr(cfg, name, update_from_dict(current, value, prefix=f"{path}."))
    else:
      setattr(cfg, name, _from_json_value(value, types_[name], path))
  return cfg


def describe(cfg) -> str:
  """One 'path = value' line per leaf, for logs and `--help` epilogues."""
  lines = []
  for path in leaf_paths(cfg):
    value = cfg
    for part in path.split("."):
      value = getattr(value, part)
    lines.append(f"{path} = {value!r}")
  return "\n".join(lines)
