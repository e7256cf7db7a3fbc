"""os-ken apps used only as baselines by `scripts/bench_controller.py`."""
