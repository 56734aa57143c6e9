"""A minimal Django project that enqueues queuey jobs in its own transactions."""
