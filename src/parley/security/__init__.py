"""Security: API keys, bearer tokens, authorization, rate limits and input limits (the pipeline's access steps)."""
