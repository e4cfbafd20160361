"""The world counter: bumped whenever a binding that compiled code may depend on changes.

A cached launch compares one integer against the counter it saw last; only when the world has
moved does it re-validate its dependency records.
"""

import itertools

from ..config import code_setting_listeners

_counter = itertools.count(1)
#: Current world age; read it as ``world.age``.
age = 0


def bump():
    global age
    age = next(_counter)
    return age


code_setting_listeners.append(bump)    # (settings.fastmath, settings.default_context)
