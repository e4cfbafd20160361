"""Collects the typing and lowering registries of every intrinsic module."""

import importlib

_MODULES = ("indexing", "devicemath", "libdevice_calls", "sync", "memory", "constmem", "atomics", "warp",
            "bits", "bf16", "fp8", "printing", "external", "cg", "vectors", "cachehints")


def _modules():
    return [importlib.import_module(f"{__package__}.{name}") for name in _MODULES]


def typing_registries():
    return [m.typing for m in _modules()]


def lowering_registries():
    return [m.lowering for m in _modules()]


def language_modules():
    """Modules whose ``__all__`` names make up ``gpureplace.cuda``."""
    return [m for m in _modules() if m.__name__.rsplit(".", 1)[1] not in ("devicemath",
                                                                           "libdevice_calls")]
