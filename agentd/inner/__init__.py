"""The inner loop: make what a goal needs — generate → a general judge checks it against the goal,
the request and every requirement → revise — until it passes or a bound asks the operator.
A loop: may import runs/ (a build is a run), the harness, the adapters, config/ and the ground.

`spec` (requirements and verdicts), `prompts` and `checks` are pure; `driver` is the build run,
`calls` its model calls.
"""
