"""Pure derived views of a snapshot: what the topology implies, computed without touching the host."""
