"""The study framework and its plug-ins (sweep, size-based, agents)."""
