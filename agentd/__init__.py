"""agentd: a daemon for background agents that never sleep."""

__version__ = "0.1.0"
