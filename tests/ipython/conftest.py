"""The IPython shell the extension's tests run cells in."""

import pytest


@pytest.fixture
def shell():
    """The process's InteractiveShell with the extension loaded; afterwards unloaded, the
    namespace reset, and what ``%config GPUReplace`` set forgotten (the shell keeps its config
    across loads, and the extension applies it to the process's settings)."""
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    from gpureplace.config import settings
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "gpureplace")
    yield ip
    ip.run_line_magic("unload_ext", "gpureplace")
    ip.reset(new_session=True)
    ip.config.pop("GPUReplace", None)
    settings.__init__()

