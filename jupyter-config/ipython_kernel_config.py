# Example IPython / Jupyter kernel configuration for gpureplace.
#
# Copy this file to ~/.ipython/profile_default/ipython_kernel_config.py (for Jupyter kernels) or
# ipython_config.py (for terminal IPython), or merge its lines into the one you have.  The
# kernelspec "Python 3 (gpureplace)" installed with the package loads the extension without it.

c = get_config()  # noqa: F821  (provided by IPython when it reads this file)

# Load the gpureplace extension in every kernel: registers the magics and the redefinition
# tracking that recompiles exactly the kernels that depend on a redefined function.
c.InteractiveShellApp.extensions = ["gpureplace"]

# Options of the extension (also settable at run time with `%config GPUReplace.<name> = ...`):
#
# Target architecture for compilation, e.g. "sm_90"; empty means the current GPU's
# (sm_90 when no GPU is present).
# c.GPUReplace.arch = ""
#
# Compile with fast math (approximate division, sqrt and transcendental functions; FTZ).
# c.GPUReplace.fastmath = False
#
# Report compilations and invalidations (which kernel was recompiled, and why) in the cell.
# c.GPUReplace.verbose = False
#
# Keep compiled PTX in the on-disk cache (content-hashed over the whole dependency closure).
# c.GPUReplace.cache = True
