"""topodoctor: GPU topology inspector and doctor."""

__version__ = "0.1.0"
