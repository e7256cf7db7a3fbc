"""Pure models below the policies and the analysis: power, size-based cutoffs, the RNN."""
