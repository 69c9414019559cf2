"""Sans-IO A2A protocol core: models, errors, states, JSON-RPC and version dialects."""
