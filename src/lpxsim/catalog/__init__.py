"""The catalog: shipped model configs and hardware systems, looked up by short name."""

from __future__ import annotations

import difflib
from functools import cache
from importlib import resources
from pathlib import Path

from pydantic import ValidationError

from lpxsim.core.datafile import read_yaml
from lpxsim.core.errors import UserError
from lpxsim.specs.hardware import SystemSpec
from lpxsim.specs.model import ModelSpec

# short name -> shipped config file (catalog/models/)
MODEL_FILES: dict[str, str] = {
    "gemma-4-31b": "google--gemma-4-31B-it.json",
    "gemma-4-26b-a4b": "google--gemma-4-26B-A4B.json",
    "llama-2-70b": "meta-llama--Llama-2-70b-hf.json",
    "llama-2-7b": "meta-llama--Llama-2-7b-hf.json",
    "llama-3.1-8b": "meta-llama--Llama-3.1-8B.json",
    "llama-3.1-70b": "meta-llama--Llama-3.1-70B.json",
    "llama-3.1-405b": "meta-llama--Llama-3.1-405B.json",
    "deepseek-v3": "deepseek-ai--DeepSeek-V3.json",
    "deepseek-r1": "deepseek-ai--DeepSeek-R1.json",
    "kimi-k2": "moonshotai--Kimi-K2-Instruct.json",
    "gpt-oss-120b": "openai--gpt-oss-120b.json",
    "gpt-oss-20b": "openai--gpt-oss-20b.json",
    "qwen3-32b": "Qwen--Qwen3-32B.json",
    "qwen3-235b-a22b": "Qwen--Qwen3-235B-A22B.json",
    "mixtral-8x7b": "mistralai--Mixtral-8x7B-v0.1.json",
}
MODEL_ALIASES: dict[str, str] = {"llama-3.3-70b": "llama-3.1-70b"}


def _catalog_dir(sub: str) -> Path:
    return Path(str(resources.files("lpxsim.catalog").joinpath(sub)))


def model_names() -> list[str]:
    return list(MODEL_FILES)


def _close(name: str, options: list[str], aliases: dict[str, str] | None = None) -> str:
    """'; did you mean X, Y?' over real names and aliases; an alias is shown as the real name it stands for
    (so the suggestion is a name `lpxsim models` / `lpxsim systems` lists)."""
    aliases = aliases or {}
    near = difflib.get_close_matches(name.lower(), options + list(aliases), n=5, cutoff=0.4)
    real = list(dict.fromkeys(aliases.get(n, n) for n in near))[:3]
    return f"; did you mean {', '.join(real)}?" if real else f"; known: {', '.join(options)}"


@cache
def _load_model(key: str) -> ModelSpec:
    return ModelSpec.from_path(_catalog_dir("models") / MODEL_FILES[key], name=key)


def get_model(name_or_path: str | ModelSpec) -> ModelSpec:
    """A catalog model by short name (or alias), or any config.json path."""
    if isinstance(name_or_path, ModelSpec):
        return name_or_path
    key = str(name_or_path).strip()
    low = key.lower()
    low = MODEL_ALIASES.get(low, low)
    if low in MODEL_FILES:
        return _load_model(low)
    from lpxsim.core.inputs import is_file

    if key.endswith(".json") or "/" in key or is_file(key) or is_file(Path(key) / "config.json"):
        return ModelSpec.from_path(key)
    raise UserError("model", f"unknown model {key!r}" + _close(low, model_names(), MODEL_ALIASES))


def _system_files() -> dict[str, Path]:
    d = _catalog_dir("systems")
    return {p.stem: p for p in sorted(d.glob("*.yaml"))}


@cache
def _load_system(path: str) -> SystemSpec:
    raw = read_yaml(path)  # libyaml's loader, or (unchanged file) its JSON memo: no YAML import at all
    try:
        return SystemSpec.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise UserError(f"system.{loc}", f"{err['msg']} in {Path(path).name}") from None


def system_names() -> list[str]:
    return list(_system_files())


def all_systems() -> list[SystemSpec]:
    return [_load_system(str(p)) for p in _system_files().values()]


def get_system(name: str | SystemSpec) -> SystemSpec:
    """A catalog system by short name or alias (e.g. 'lpx', 'vr-nvl72', 'h200-hgx')."""
    if isinstance(name, SystemSpec):
        return name
    key = str(name).strip().lower()
    files = _system_files()
    if key in files:
        return _load_system(str(files[key]))
    for spec in all_systems():
        if key in spec.aliases:
            return spec
    aliases = {a: s.name for s in all_systems() for a in s.aliases}
    raise UserError("system", f"unknown system {name!r}" + _close(key, list(files), aliases))
