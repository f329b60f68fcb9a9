"""The names of the embedding adapters, apart from the adapters themselves (which need numpy):
the command line lists them on a core install of Oh."""

EMBEDDERS = ("hashing", "local", "openai")
