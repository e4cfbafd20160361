from .context import Context, Override, builtin_context, default_context, override  # noqa: F401
