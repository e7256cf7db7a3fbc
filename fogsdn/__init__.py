"""fogsdn: fogsdn."""
