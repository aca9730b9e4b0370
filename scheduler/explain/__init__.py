"""What people and histories are told of a cycle."""
