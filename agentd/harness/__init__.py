"""What the model may choose and what the harness allows: the menu's schema and the reply parser
(menu), the policy that allows, gates or denies an action (policy), and the prompt that quotes
observed text as data (prompt). Pure: may import actions/, config/ and the ground; never db/, llm/ or a loop.
"""
