"""An async A2A client for any server (0.3 and 1.0), used by the CLI and by agents."""

from parley.client.client import A2AClient, user_message
from parley.client.errors import ClientError

__all__ = ["A2AClient", "ClientError", "user_message"]
