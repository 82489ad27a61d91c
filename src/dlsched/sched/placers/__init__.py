"""Placement plug-ins: scorers (and their exact bucket fast paths), filters and permits."""
