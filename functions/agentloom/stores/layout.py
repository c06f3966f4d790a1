"""The files of an embedded home (the state directory, ``--home``): one SQLite file that
every store of the home shares, and the key file its envelopes are sealed under."""

DATABASE = "agentloom.sqlite3"
KEY_FILE = "agentloom.key"
