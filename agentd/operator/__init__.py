"""The use cases every surface shares — add, pause and resume goals (goals); answer, approve, deny
and dismiss inbox items (inbox); schedules, snoozes and cadence (schedules) — each one short
transaction. May import the loops, the harness, the adapters, config/ and the ground; never a surface.

Input typed by a person (`--deadline "in 2h"`, JSON objects) is parsed here too (parse).
"""
