"""The mail tests' fixtures: a real Dovecot per test (tests/dovecot.py)."""

from tests.dovecot import dovecot, dovecot_no_idle  # noqa: F401 (fixtures)
