"""fogsdn: engines orchestration (emulation runner, cleanup, results)."""
