"""Store protocol and the SQLite and PostgreSQL backends, migrations and blobs."""
