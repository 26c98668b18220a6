"""`agentd serve`: the lifecycle (config, migrate, recover, root tasks, TERM drain, HUP reload,
systemd notify) and the scheduler that only wakes runs, check-ins and pollers. May import every
layer below the CLI and the demo (it starts the API, which serves /mcp and the web inbox).
"""
