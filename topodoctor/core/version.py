"""topodoctor's version, where every stage reads it (``topodoctor.__version__`` loads it from here):
the package's own ``__init__`` holds the Python API above the rest of the code, so a probe or a
report that named the package for it would import upwards."""

__version__ = "0.1.0"  # pyproject.toml's, held equal by tests/cli/test_cli.py
