"""The os-ken controller: a thin app around the pure OpenFlow pipeline."""
