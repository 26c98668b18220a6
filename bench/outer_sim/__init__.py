"""The outer-loop benchmark's simulation (bench/outer_loop.py drives it).

scenarios (one seed → a goal, a world timeline, needs with deadlines, faults, what the user knows) ·
model (the scripted check-in model) · user (asleep at night, answers, accepts, dismisses) ·
agentd_sim (the real database and check-in code on a manual clock) · journal (agentd's check-in
journal read back into figures) · baselines (heartbeat, cron, cron without catch-up, in memory) ·
world (the simulated sources) · metrics (one trace per run, the figures, the scenario checks).
"""
