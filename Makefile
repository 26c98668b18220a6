# The README's two commands: `make demo` and `make test`. Both set everything up from a fresh clone.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test check lint format bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/agentd demo --yes

test: $(STAMP) check
	$(BIN)/pytest -q

# Every static check, in the order that fails fastest.
check: $(STAMP)
	$(BIN)/ruff format --check agentd tests bench
	$(BIN)/ruff check agentd tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff format agentd tests bench
	$(BIN)/ruff check --fix agentd tests bench

bench: $(STAMP)
	$(BIN)/python bench/journal.py seq --steps 200 --reps 5 --warmup 1 --workdir .bench
	$(BIN)/python bench/journal.py conc --runs 100 --steps 10 --reps 5 --warmup 1 --workdir .bench
	$(BIN)/python bench/inbox_latency.py --workdir .bench
	$(BIN)/python bench/memory.py --runs 10000 --workdir .bench
	$(BIN)/python bench/prompt_size.py --decisions 1000 --workdir .bench
	$(BIN)/python bench/outer_loop.py --seeds 20 --workdir .bench

clean:
	rm -rf $(VENV) .bench .mypy_cache .ruff_cache .pytest_cache
