# Developer shortcuts. `make test` is what CI runs; `make stress` runs every reliability and
# security suite at full size (about 17 minutes on 2 cores) and prints one summary table.
PYTHON ?= .venv/bin/python

.PHONY: test stress stress-quick

test:
	scripts/test

stress:
	$(PYTHON) stress/run_all.py

stress-quick:
	$(PYTHON) stress/run_all.py --quick
