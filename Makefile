# The two commands a newcomer needs: `make run` and `make test`.
# PYTHON=/path/to/python3.12+ overrides the interpreter search (scripts/find-python).

VENV      := .venv
PY        := $(VENV)/bin/python
STAMP     := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: run test test-unit chaos typecheck venv install migrate demo lint format bench clean

run: install migrate demo
	@scripts/run-dev.sh

test: install
	$(PY) -m pytest $(PYTEST_ARGS)

# The database-free tier (domain rules, parsers, the API's conventions): seconds, no database needed.
test-unit: install
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# The chaos suite at full size (tests/chaos/README.md): real workers under kill -9, restarts, cut connections,
# frozen processes, skewed clocks and email sends, checked against invariants I1-I9. PostgreSQL only
# (DATABASE_URL). Every scenario runs inside a budget of CHAOS_BUDGET seconds, each sized to its share
# (tests/chaos/budget.py); 900 s is the hard bound. Each scenario's figures are appended to $(CHAOS_REPORT);
# the summary after pytest fails the run naming every scenario that did not report. `make test` runs the
# short form.
CHAOS_REPORT ?= chaos-report.jsonl
CHAOS_BUDGET ?= 840
chaos: install
	@rm -f $(CHAOS_REPORT)
	RELAY_CHAOS=full RELAY_CHAOS_BUDGET=$(CHAOS_BUDGET) RELAY_REQUIRE_POSTGRES=1 \
		RELAY_CHAOS_REPORT=$(abspath $(CHAOS_REPORT)) \
		timeout --signal=INT --kill-after=30 900 $(PY) -m pytest tests/chaos --durations=0 $(PYTEST_ARGS); \
		status=$$?; $(PY) -m tests.chaos.summary $(CHAOS_REPORT) || status=1; exit $$status

# mypy with the Django and DRF plugins over the whole tree (configured in pyproject.toml).
typecheck: install
	$(VENV)/bin/mypy

# ruff, then the import contracts (pyproject.toml [tool.importlinter], docs/decisions/import-contracts.md).
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format: install
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

venv: $(PY)

$(PY):
	@interp=$$(scripts/find-python) || exit 1; \
	echo "Creating $(VENV) with $$interp"; \
	"$$interp" -m venv $(VENV)

install: $(STAMP)

$(STAMP): requirements.txt $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	@touch $(STAMP)

# Every configured database: `default`, and the queue's own when JOBS_DATABASE_URL is set (alias `jobs`).
migrate: install
	@for db in $$($(PY) manage.py shell -v 0 -c "from django.conf import settings; print(*settings.DATABASES)"); do \
		echo "migrate --database $$db"; $(PY) manage.py migrate --noinput --database "$$db" || exit 1; done

demo: migrate
	$(PY) manage.py bootstrap_demo

bench: install
	$(PY) bench/queue_throughput.py

clean:
	rm -rf $(VENV) db.sqlite3 .pytest_cache
