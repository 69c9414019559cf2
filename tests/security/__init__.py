"""Tests of parley.security: authentication, rate limits."""
