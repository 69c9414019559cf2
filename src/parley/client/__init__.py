"""An async A2A client for any server (0.3 and 1.0), used by the CLI and by agents."""

from parley.client import transports as _transports
from parley.client.card_trust import CardTrust, CardVerificationError
from parley.client.client import A2AClient, Push, push_config, user_message
from parley.client.errors import ClientError
from parley.client.rest import RestTransport
from parley.protocol.models import AuthenticationInfo, TaskPushNotificationConfig

# The bindings A2AClient can use besides JSON-RPC (registered once, at import of parley.client).
_transports.register("HTTP+JSON", RestTransport, {"1.0", "0.3"})

try:  # the gRPC binding registers itself when parley-a2a[grpc] is installed
    from parley.client import grpc as _grpc  # noqa: F401
except ImportError:
    pass

__all__ = ["A2AClient", "AuthenticationInfo", "CardTrust", "CardVerificationError", "ClientError", "Push", "RestTransport", "TaskPushNotificationConfig",
           "push_config", "user_message"]
