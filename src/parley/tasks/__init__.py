"""Tasks: the event log, stores and the engine that runs agents."""
