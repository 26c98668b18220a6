# The README's two commands: `make demo` and `make test`. Both set everything up from a fresh clone.
#
# Python: agentd needs 3.11 or newer. Without PYTHON=, the first of python3.14 … python3.11 and
# then python3 on PATH that is new enough is used; name another with
# `make PYTHON=/path/to/python3.12 demo`. A .venv made by an older (or a vanished) Python is
# rebuilt.
PY_OK   := -c 'import sys; sys.exit(sys.version_info < (3, 11))'
ifeq ($(origin PYTHON),undefined)
PYTHON  := $(firstword $(foreach p,python3.14 python3.13 python3.12 python3.11 python3,\
             $(shell command -v $(p) >/dev/null 2>&1 && $(p) $(PY_OK) 2>/dev/null && echo $(p))))
endif
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: demo test check lint format bench clean browser

# A venv whose Python is too old or gone is stale whatever its stamp says.
ifneq ($(shell $(BIN)/python $(PY_OK) 2>/dev/null && echo ok),ok)
$(STAMP): .FORCE
endif
.FORCE:

$(STAMP): pyproject.toml
	@test -n "$(PYTHON)" && $(PYTHON) $(PY_OK) 2>/dev/null || { \
	  echo "agentd needs Python >= 3.11; $(if $(PYTHON),$(PYTHON) is not one,none was found on PATH)."; \
	  echo "Install one, or name it: make PYTHON=/path/to/python3.11 $(or $(MAKECMDGOALS),demo)"; \
	  exit 2; }
	@$(BIN)/python $(PY_OK) 2>/dev/null || { \
	  test ! -e $(VENV) || echo "$(VENV) was made by a Python older than 3.11 (or one that is gone): rebuilding it"; \
	  rm -rf $(VENV); }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/agentd demo --yes --keep

# Parallel workers: most tests wait on subprocesses and sockets, so 4 workers fit 2 cores.
# `--dist loadgroup` deals the tests out one at a time, the longest modules first by the last
# run's times (tests/ordering.py), a module marked `xdist_group` whole to one worker (its module
# fixture built once; tests/xdist_groups.py); each worker starts its real servers once (tests/servers.py).
# `make test WORKERS=0` runs them in one process. The slowest 25 are listed at the end: the
# suite should stay under ~6 min of pytest on a quiet 2-core machine.
WORKERS ?= 4

test: $(STAMP) check browser
	$(BIN)/pytest -q --durations=25 $(if $(filter 0,$(WORKERS)),,-n $(WORKERS) --dist loadgroup)

# Debian's chromium for the real-browser tests (Playwright drives it; `playwright install` cannot reach
# its download host). Installed with apt-get when missing and we are root (or have passwordless sudo);
# never fails the build: without it those tests are skipped with a loud banner.
browser:
	@bash .ci/install-chromium || true

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
	$(BIN)/python bench/journal.py seq --steps 1000 --reps 5 --warmup 1 --workdir .bench --store pg
	$(BIN)/python bench/journal.py conc --runs 100 --steps 50 --reps 5 --warmup 1 --workdir .bench --store pg
	$(BIN)/python bench/inbox_latency.py latency --samples 20 --lost-samples 8 --workdir .bench
	$(BIN)/python bench/inbox_latency.py idle --runs 10000 --seconds 60 --workdir .bench
	$(BIN)/python bench/memory.py --runs 10000 --workdir .bench
	$(BIN)/python bench/prompt_size.py --decisions 1000 --workdir .bench
	$(BIN)/python bench/outer_loop.py --seeds 20 --workdir .bench
	$(BIN)/python bench/telemetry.py steps --runs 50 --steps 200 --reps 5 --workdir .bench
	$(BIN)/python bench/telemetry.py metrics --goals 1000 --waiting 10000 --reps 5 --workdir .bench
	$(BIN)/python bench/inner_loop.py --workdir .bench
	$(BIN)/python bench/cli_startup.py --reps 15 --warmup 2 --workdir .bench
	$(BIN)/python bench/mail.py latency --samples 30 --workdir .bench
	$(BIN)/python bench/mail.py ingest --messages 10000 --workdir .bench
	$(BIN)/python bench/mail.py idle --seconds 60 --workdir .bench
	$(BIN)/python bench/db_outage.py --daemons 2 --restarts 10 --down-s 1 --outage-s 5 --runs 40 --workdir .bench

clean:
	rm -rf $(VENV) .bench .mypy_cache .ruff_cache .pytest_cache
