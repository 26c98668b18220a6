"""The run loop: observe → decide → check → act, one journaled step at a time, resumable after a crash.

May import the harness, the adapters (db/, llm/, actions/, sources/, outside/), config/ and the
ground; never the operator layer, a surface or the daemon.

engine (a run's turns and its lease) · deciding (asking the model, the reply journaled before it
is trusted) · model_calls (budget, cost, backoff, history summaries) · acting (an allowed action:
intent, execution, result) · recovery (an action a crash interrupted: fenced, then re-run,
verified or asked about) · control (the control actions' effects: waits, wakes, world snapshots)
· deps (everything the loops talk to, passed down).
"""
