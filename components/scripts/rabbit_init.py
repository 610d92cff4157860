"""Create a service's RabbitMQ vhost and user through the management API; safe to run again."""

import base64
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def call(method: str, path: str, body: dict | None = None) -> None:
    api = os.environ["RABBIT_API"].rstrip("/")
    token = base64.b64encode(f"{os.environ['RABBIT_ADMIN_USER']}:{os.environ['RABBIT_ADMIN_PASSWORD']}".encode())
    request = urllib.request.Request(
        f"{api}/api/{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Basic {token.decode()}", "Content-Type": "application/json"},
    )
    # Under internal TLS the API is https, verified (chain and host name) with the internal CA only.
    ca_file = os.environ.get("RABBIT_CA_FILE")
    context = ssl.create_default_context(cafile=ca_file) if ca_file else None
    deadline = time.monotonic() + 300
    while True:
        try:
            with urllib.request.urlopen(request, timeout=30, context=context):
                return
        except urllib.error.URLError as error:
            if isinstance(error, urllib.error.HTTPError) or time.monotonic() > deadline:
                raise
            print(f"RabbitMQ management API not reachable yet ({error.reason}); retrying", file=sys.stderr)
            time.sleep(5)


def main() -> None:
    user, vhost = os.environ["RABBIT_USER"], os.environ["RABBIT_VHOST"]
    quoted_vhost, quoted_user = urllib.parse.quote(vhost, safe=""), urllib.parse.quote(user, safe="")
    call("PUT", f"vhosts/{quoted_vhost}", {"default_queue_type": "quorum"})
    call("PUT", f"users/{quoted_user}", {"password": os.environ["RABBIT_PASSWORD"], "tags": ""})
    call("PUT", f"permissions/{quoted_vhost}/{quoted_user}", {"configure": ".*", "write": ".*", "read": ".*"})
    print(f"vhost {vhost} ready for user {user}")


if __name__ == "__main__":
    main()
