"""os-ken apps used only as baselines by the controller benchmark (`tools/bench/controller.py`)."""
