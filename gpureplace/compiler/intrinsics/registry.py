"""Collects the typing and lowering registries of every intrinsic module."""

import importlib

_MODULES = ("indexing", "devicemath", "libdevice_calls")
_OPTIONAL = ("sync", "memory", "atomics", "warp", "bits", "printing")


def _modules():
    mods = [importlib.import_module(f"{__package__}.{name}") for name in _MODULES]
    for name in _OPTIONAL:
        try:
            mods.append(importlib.import_module(f"{__package__}.{name}"))
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.{name}":
                raise
    return mods


def typing_registries():
    return [m.typing for m in _modules()]


def lowering_registries():
    return [m.lowering for m in _modules()]


def language_modules():
    """Modules whose ``__all__`` names make up ``gpureplace.cuda``."""
    return [m for m in _modules() if m.__name__.rsplit(".", 1)[1] not in ("devicemath",
                                                                           "libdevice_calls")]
