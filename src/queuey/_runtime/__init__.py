"""The worker's internals: handler registration (``handlers``) and running one delivery to an
outcome (``execute``). Not public API."""
