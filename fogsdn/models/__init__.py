"""Pure models: power, sizes, the RNN scorer, service queues."""
