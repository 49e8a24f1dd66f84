"""The evaluation suite for Nexus policies (docs/evaluation.md), one module per concern.

`scenarios` (held-out env variants and cells: who plays which seat), `runner` (the jitted
episode runner over cells and the bank of trained policies), `studies` (scenario tables,
cross-play and Elo, snapshot curves, shock attribution) and `cli` (`run_suite` on a run folder,
`python -m train.evaluate RUN_DIR --suite`). Statistics are in `train.stats`.
"""
