"""The PostgreSQL backend. ``notebooks`` holds the pool, migration and error rules every part
shares, the memory store and the purge worker's access; ``knowledge``, ``host``, ``vectors`` and
``keys`` the other parts (the key store for many servers); ``prepared`` the single-change call
sent through libpq."""
