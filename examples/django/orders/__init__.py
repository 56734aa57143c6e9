"""The example shop's one Django app: orders."""
