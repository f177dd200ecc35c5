"""A package, so that pytest imports conftest.py here as redteam.conftest: tests/e2e's modules
do `from conftest import ...`, which a second top-level `conftest` would shadow in a run of both."""
