"""The exact side: chains, solvers, predictions and the optimum."""
