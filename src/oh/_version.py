"""The version of Oh, the one place it is written (``pyproject.toml`` reads it from here).

Its own module so that a transport can name the version without importing the whole package.
"""

__version__ = "0.1.0"
