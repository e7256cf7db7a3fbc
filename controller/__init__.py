"""fogsdn: controller."""
