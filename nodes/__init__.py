"""fogsdn: nodes."""
