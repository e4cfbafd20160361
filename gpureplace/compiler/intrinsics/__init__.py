"""Device intrinsics: the kernel language (``gpureplace.cuda``) and device math.

Each module owns one area and registers its typing templates and lowerings in its own ``typing``
and ``lowering`` registries; ``registry`` collects them for the typing and target contexts.
"""
