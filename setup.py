"""Build hook: everything is in pyproject.toml except one fix for editable installs.

setuptools' editable wheel (PEP 660, ``pip install -e .``) never installs ``data-files``: it asks
the distribution for ``has_data()``, which does not exist (the method is ``has_data_files``), so
the Jupyter kernelspec ``share/jupyter/kernels/gpureplace/kernel.json`` would be missing from
editable installs.  This command installs the data files into the editable wheel, as a normal
wheel does.  tests/packaging/test_packaging.py checks the kernelspec lands in both kinds of install.
"""

from setuptools import setup
from setuptools.command.editable_wheel import editable_wheel


class editable_wheel_with_data(editable_wheel):
    def _run_install(self, category):
        if category == "data":
            if self.distribution.has_data_files():
                self.run_command("install_data")
            return
        super()._run_install(category)


setup(cmdclass={"editable_wheel": editable_wheel_with_data})
