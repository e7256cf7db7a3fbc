"""fogsdn: sim."""
