"""Typed run configurations: what they hold, how the command line overrides them, their JSON form.

A run is described by a `Config`: the engine's own settings (`train`, `optimizer`) plus two slots
an experiment fills with its own dataclasses (`model`, `data`). Each named run (an experiment and a
model name) is a function returning a `Config`; its docstring says how to run it and what it
reached.

Every setting has one name, its dotted path, from the command line to config.json:

    python -m experiments train sentiment --optimizer.learning_rate=3e-4 --train.num_epochs 4 \
        --data.boundaries 64 128 256 --data.max_size None --train.progress_bar False

The command-line overrides are parsed by tyro against the declared field types (`override`); the
saved config.json is read back into the dataclasses by dacite (`update_from_dict`). Neither parses a
value by hand: an unknown field, a value of the wrong type or a choice that is not offered is an
error that names the field.

Old config.json files keep loading: a setting renamed since is read under its new name
(RENAMED_KEYS), and a setting added since takes the named run's default, unless the section's
dataclass says that leaving it out meant something else: its class attribute
`OLD_RUN_VALUES = {field: value}` gives the value a saved config without that field had (e.g.
translation's `data.tokenizer`: runs saved before it existed used 'd2l_words', while new runs
default to 'sentencepiece'; sentiment's `data.protocol`: 'random_dev' before, 'movie_dev' now).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import re
from typing import Any, Literal, Mapping, Sequence

import dacite
import jax.numpy as jnp
import tyro

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
      `decay_steps`), 'rsqrt' (learning_rate * sqrt(warmup_steps / step), the Transformer's
      decay) or 'cosine_to_last' (`train_state.cosine_to_last_rates`: warm-up steps s < W at
      learning_rate * (s + 1) / W, then a cosine reaching `min_lr_ratio` * learning_rate at the
      run's last step, each rate computed in float64 and rounded once to float32).
    warmup_steps: linear warm-up from 0 over this many steps (0 = none).
    warmup_fraction: if set, the warm-up is this share of the run's steps instead,
      max(int(warmup_fraction * total), 1) steps (warmup_steps is then ignored).
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
  schedule: Literal["constant", "cosine", "rsqrt", "cosine_to_last"] = "constant"
  warmup_steps: int = 0
  warmup_fraction: float | None = None
  decay_steps: int | None = None
  min_lr_ratio: float = 0.0

  def ignored_fields(self) -> dict[str, str]:
    """The fields that have no effect under the other settings, each with the reason (see
    `train_state.make_optimizer` and `make_schedule`)."""
    ignored = {}
    if self.name != "adamw":
      ignored["weight_decay"] = f"only adamw decays weights (optimizer.name = {self.name!r})"
    if self.name != "sgd":
      ignored["momentum"] = f"only sgd uses momentum (optimizer.name = {self.name!r})"
    if self.name == "sgd":
      for name in ("b1", "b2", "eps"):
        ignored[name] = "only adam and adamw use it (optimizer.name = 'sgd')"
    if self.schedule not in ("cosine", "cosine_to_last"):
      for name in ("decay_steps", "min_lr_ratio"):
        ignored[name] = f"only the cosine schedule uses it (optimizer.schedule = {self.schedule!r})"
    if self.schedule == "cosine_to_last":
      ignored["decay_steps"] = "the cosine_to_last schedule decays until the last step"
    if self.warmup_fraction is not None:
      ignored["warmup_steps"] = (f"optimizer.warmup_fraction = {self.warmup_fraction} sets the "
                                 "warm-up")
    return ignored


@dataclasses.dataclass
class TrainConfig:
  """How long to train, how often to log, evaluate and save, and in which precision.

  Attributes:
    seed: seeds parameter initialisation, dropout (folded with the step) and the data order.
    batch_size: global training batch size (split over all devices; must be a multiple of their
      number).
    eval_batch_size: evaluation batch size; None = `batch_size`.
    num_epochs: epochs to train, when `num_steps` is None. On the command line the later of
      --train.num_epochs and --train.num_steps wins: --train.num_epochs alone clears a named run's
      `num_steps`, so the epochs count.
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
    progress_bar: show a tqdm progress bar on the console (only when standard error is a
      terminal: a log file gets the metric lines instead).
    divergence_factor: stop training when a logging interval's mean training objective exceeds
      the larger of this times the lowest interval mean so far and the first interval's mean (a
      loss that stays finite but diverges; trainer.DivergenceGuard); None = never.
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
  divergence_factor: float | None = 10.0

  def ignored_fields(self) -> dict[str, str]:
    """The fields that have no effect under the other settings, each with the reason."""
    if self.num_steps is not None:
      return {"num_epochs": f"train.num_steps = {self.num_steps} sets the length of the run"}
    return {}


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


# Settings renamed since runs were first saved: config.json files written under the old name load
# under the new one (a renamed field must keep its meaning).
RENAMED_KEYS = {"data.buckets": "data.boundaries", "data.max_vocab": "data.max_size"}
# Settings added since: a section's dataclass may name, in a class attribute of this name, the value
# each added field had in effect before it existed ({'protocol': 'random_dev'}); a config.json
# without the key loads with that value, not the named run's current default.
OLD_RUN_VALUES = "OLD_RUN_VALUES"


class ConfigError(ValueError):
  """A config override or a saved config that does not fit the declared fields."""


def sections(cfg: Config) -> dict[str, Any]:
  """The dataclass-valued fields of `cfg` by name: train, optimizer and, when set, model, data."""
  return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)
          if dataclasses.is_dataclass(getattr(cfg, f.name))}


# --------------------------------------------------------------------------------------------------
# Command-line overrides (tyro).


def _overrides_class(cfg: Config) -> type:
  """A dataclass with one field per section of `cfg`, typed by the section's own class.

  `Config.model` and `Config.data` are declared `Any` (each experiment brings its own classes);
  tyro needs the concrete classes to know the fields and their types.
  """
  return dataclasses.make_dataclass(
      "Overrides", [(name, type(value)) for name, value in sections(cfg).items()])


def _plain_text(tyro_output: str) -> str:
  """tyro's error panel as plain lines: box drawing and padding removed."""
  lines = (re.sub(r"[\u2500-\u257f]", "", line).strip() for line in tyro_output.splitlines())
  kept = [line for line in lines if line and set(line) != {"-"} and not line.startswith("For full")]
  return "\n".join(kept)


@contextlib.contextmanager
def _wide_terminal(columns: int = 1000):
  """Lets tyro write each message on one line (it wraps at the terminal's width, read from
  $COLUMNS), so that the error raised keeps whole sentences."""
  before = os.environ.get("COLUMNS")
  os.environ["COLUMNS"] = str(columns)
  try:
    yield
  finally:
    if before is None:
      del os.environ["COLUMNS"]
    else:
      os.environ["COLUMNS"] = before


def override(cfg: Config, args: Sequence[str], prog: str = "python -m experiments train") -> Config:
  """A copy of `cfg` with command-line overrides applied.

  Args:
    cfg: a Config whose sections (train, optimizer, model, data) are dataclasses.
    args: command-line words, one field per flag named by its dotted path:
      ['--optimizer.learning_rate=3e-4', '--train.num_epochs', '4', '--data.boundaries', '8', '16',
      '--data.max_size', 'None', '--train.progress_bar=False'] (tuples take several words;
      booleans True or False; optional fields None).
    prog: the command named in error messages.

  Returns:
    A new Config; `cfg` is left unchanged.

  Raises:
    ConfigError: an unknown field (with the closest names), a value that does not parse to the
      field's type, or a choice that is not offered; the message is tyro's.
  """
  if not args:
    return copy_config(cfg)
  overrides_class = _overrides_class(cfg)
  output = io.StringIO()
  try:
    with contextlib.redirect_stderr(output), contextlib.redirect_stdout(output), _wide_terminal():
      parsed = tyro.cli(overrides_class, args=list(args), default=overrides_class(**sections(cfg)),
                        prog=prog, use_underscores=True, config=(tyro.conf.FlagConversionOff,))
  except SystemExit:
    raise ConfigError(_plain_text(output.getvalue()) or f"bad config overrides: {list(args)}") \
        from None
  cfg = dataclasses.replace(cfg, **{f.name: copy_config(getattr(parsed, f.name))
                                    for f in dataclasses.fields(parsed)})
  given = given_paths(args)
  cfg, superseded = _later_wins(cfg, given)
  check_overrides_apply(cfg, [path for path in given if path not in superseded])
  return cfg


# Pairs of settings where one makes the other idle (`ignored_fields`): when both are on the command
# line, the one given later wins; one given alone wins over the named run's value of the other.
# (path, the other path, the other's value that lets `path` take effect)
_LATER_WINS = (("train.num_epochs", "train.num_steps", None),)


def given_paths(args: Sequence[str]) -> list[str]:
  """The dotted paths that command-line override words set, in their order on the line."""
  return [word[2:].split("=", 1)[0].replace("-", "_") for word in args
          if word.startswith("--") and len(word) > 2 and not word[2].isdigit()]


def _later_wins(cfg: Config, given: Sequence[str]) -> tuple[Config, set[str]]:
  """`cfg` with each pair of _LATER_WINS settled by the command line's order, and the given paths
  that a later one superseded (the run's first line says which setting decided)."""
  superseded = set()
  for path, other, neutral in _LATER_WINS:
    if path not in given:
      continue
    if other not in given or given[::-1].index(path) < given[::-1].index(other):
      section, field = other.split(".")
      cfg = dataclasses.replace(
          cfg, **{section: dataclasses.replace(getattr(cfg, section), **{field: neutral})})
      if other in given:
        superseded.add(other)
    else:
      superseded.add(path)
  return cfg, superseded


def ignored_settings(cfg: Config) -> dict[str, str]:
  """{dotted path: why it has no effect} over the sections that declare `ignored_fields()`."""
  out = {}
  for name, section in sections(cfg).items():
    if hasattr(section, "ignored_fields"):
      out.update({f"{name}.{field}": why for field, why in section.ignored_fields().items()})
  return out


def check_overrides_apply(cfg: Config, given: Sequence[str]) -> None:
  """Refuses overrides that the rest of the config would leave without effect.

  Raises:
    ConfigError: naming each such setting and why it does not apply.
  """
  ignored = ignored_settings(cfg)
  idle = [f"--{path} has no effect: {ignored[path]}" for path in dict.fromkeys(given)
          if path in ignored]
  if idle:
    raise ConfigError("; ".join(idle))


def copy_config(cfg):
  """A deep copy of a dataclass config (nested dataclasses are copied too)."""
  changes = {}
  for field in dataclasses.fields(cfg):
    value = getattr(cfg, field.name)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
      changes[field.name] = copy_config(value)
  return dataclasses.replace(cfg, **changes)


# --------------------------------------------------------------------------------------------------
# The JSON form (config.json; dacite reads it back).


def to_dict(cfg) -> dict[str, Any]:
  """The config as plain JSON-ready data (tuples become lists)."""
  return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))


def with_current_names(values: Mapping[str, Any]) -> dict[str, Any]:
  """A copy of a saved config dict with every key of RENAMED_KEYS moved to its current name."""
  values = json.loads(json.dumps(values))
  for old, new in RENAMED_KEYS.items():
    *parents, old_leaf = old.split(".")
    owner = values
    for part in parents:
      owner = owner.get(part) if isinstance(owner, dict) else None
    if isinstance(owner, dict) and old_leaf in owner:
      owner[new.rsplit(".", 1)[-1]] = owner.pop(old_leaf)
  return values


_DACITE = dacite.Config(cast=[tuple], strict=True, type_hooks={float: float})


def _merged(current, saved: Mapping[str, Any], path: str):
  """`current` (a dataclass) with the saved values applied, through dacite's type checks."""
  if not isinstance(saved, Mapping):
    raise ConfigError(f"{path}: expected a mapping of its fields, got {saved!r}")
  data = {**dataclasses.asdict(current), **getattr(current, OLD_RUN_VALUES, {}), **saved}
  try:
    return dacite.from_dict(type(current), data, config=_DACITE)
  except dacite.UnexpectedDataError as e:
    names = ", ".join(f.name for f in dataclasses.fields(current))
    raise ConfigError(f"unknown config keys {sorted(e.keys)} in {path}; its fields are: "
                      f"{names}") from None
  except dacite.DaciteError as e:
    raise ConfigError(f"{path}: {e}") from None


def update_from_dict(cfg: Config, values: Mapping[str, Any]) -> Config:
  """Returns a copy of `cfg` with the entries of `values` (as written by `to_dict`) applied.

  Keys renamed since (RENAMED_KEYS) are read under their current names; a key missing from
  `values` keeps `cfg`'s value, unless its section's dataclass names an old-run value for it
  (OLD_RUN_VALUES): a run saved before a setting existed ran with that value.

  Raises:
    ConfigError: a key `cfg` does not have, or a value of the wrong type (each named by its path).
  """
  values = with_current_names(values)
  parts = sections(cfg)
  names = [f.name for f in dataclasses.fields(cfg)]
  unknown = sorted(set(values) - set(names))
  if unknown:
    raise ConfigError(f"unknown config keys {unknown}; the top-level keys are: {', '.join(names)}")
  changes = {}
  for name, value in values.items():
    if name in parts:
      changes[name] = _merged(parts[name], value, name)
    elif name in ("model", "data") and value is not None:
      raise ConfigError(f"{name}: the named run has no {name} settings, but the saved config has "
                        f"{value!r}")
    else:
      changes[name] = value
  return dataclasses.replace(copy_config(cfg), **changes)


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


def describe(cfg) -> str:
  """One 'path = value' line per leaf, for `--show-config` and logs."""
  lines = []
  for path in leaf_paths(cfg):
    value = cfg
    for part in path.split("."):
      value = getattr(value, part)
    lines.append(f"{path} = {value!r}")
  return "\n".join(lines)
