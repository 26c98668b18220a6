"""The text forms every surface shares: tables, the run timeline, check-in outlooks, artifacts and
times (the CLI prints them; the web inbox, MCP and the demo reuse them). Pure functions over
records and plain data: may import config/ and the ground; never db/, a loop or the operator layer.
"""
