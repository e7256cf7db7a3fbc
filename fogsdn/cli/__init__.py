"""The commands (`fogsdn-run`, `fogsdn-sweep`): argument parsing on top of everything else."""
