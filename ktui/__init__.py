"""ktui: a live kernel-probing dashboard for kprobes and kretprobes."""

# The one version number: pyproject.toml reads it from here (hatch's dynamic
# version) and `ktui --version` prints it.
__version__ = "0.1.0"
