"""The embedded backend: SQLite files on this machine, through the standard library's ``sqlite3``
(the default) or the optional ``libsql`` driver. ``notebooks`` holds the connection, migration
and error rules every file here shares, the memory store and the purge worker's access;
``knowledge``, ``host`` and ``vectors`` the other databases' parts; ``keys`` the key store file."""
