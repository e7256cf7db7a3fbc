"""fogsdn: agents."""
