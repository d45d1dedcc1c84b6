"""The package version, on the bottom floor so that any module may read it."""

__all__ = ["__version__"]
__version__ = "0.1.0"
