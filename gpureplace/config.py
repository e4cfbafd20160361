"""Process-wide settings (the IPython extension's ``%config GPUReplace.*`` writes these).

    gpureplace.config.settings.fastmath = True      # every kernel without an explicit context
    gpureplace.config.settings.arch = "sm_90"       # compile for this arch instead of the GPU's
    gpureplace.config.settings.default_context = my_context
    gpureplace.config.settings.verbose = True       # say what recompiles, why, and how long it took
"""

from __future__ import annotations


class Settings:
    def __init__(self):
        self.fastmath = False
        self.arch = None                # None: the current GPU's, or sm_90 without one
        self.default_context = None     # None: gpureplace.default_context
        self.verbose = False

    def context(self):
        from .dispatch.context import default_context
        return self.default_context or default_context


settings = Settings()
