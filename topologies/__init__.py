"""fogsdn: topologies."""
