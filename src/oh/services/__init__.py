"""The services over the stores: notebooks and their lifecycle, reviewed knowledge, access
checks, the query engine and the notebook view. Tools, the host and the transports build on
them; they import only the core, the keys and the storage protocols."""
