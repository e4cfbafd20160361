from .context import (Context, Override, builtin_context, default_context,  # noqa: F401
                      fastmath_context, override)
