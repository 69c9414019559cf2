"""Push notifications: webhook configs, a durable outbox, delivery with retries, signatures, SSRF guard."""
