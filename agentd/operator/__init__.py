"""The use cases every surface shares — add, pause and resume goals (goals); answer, approve, deny
and dismiss inbox items (inbox); schedules, snoozes and cadence (schedules); send events (events)
— each one short transaction. May import the loops, the harness, the adapters, the pure views
(parse echoes a typed-in time in the views' style), config/ and the ground; never a surface.

Surfaces reach the database only through here: what they read of goals and the inbox (goals,
inbox), of runs, builds and usage (runs, artifacts), the home at a glance (overview), what doctor
checks of the home's contents (health), and the store handle they open and pass around (home).
Input typed by a person (`--deadline "in 2h"`, JSON objects) is parsed here too (parse).
"""
