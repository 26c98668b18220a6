"""The outer loop: goals that remember why and check back in on their own.
A loop: may import runs/ (to start a run), the harness, the adapters, config/ and the ground.

schedule (when fires are due: cron / interval, time zones, DST, misfire policy, jitter) · crontab (a
cron expression parsed and validated) · cadence (the goal's bounds: min / max interval, quiet hours,
backoff, deadlines) · precheck (did anything move? no model call) · checkin (one journaled,
resumable check-in: precheck → model → effect) · checkin_facts (what a check-in looks at, and the
model request built from it) · memory (what the goal knows) · fires (due times recorded as check-in
rows, missed ones with their reason) · service (the daemon side: wakes, catch-up, the worker).
"""
