"""`python -m agentd` is `agentd`."""

from agentd.cli import main

main()
