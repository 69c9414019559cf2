"""The hub: configuration, routing, delegation over A2A, remote agents and traces."""
