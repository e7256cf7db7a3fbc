"""fogsdn: analysis."""
