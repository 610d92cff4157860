"""A VNC client through nova's own console security proxy to a guest's VNC server; run with the OpenStack venv.

`vnc_through_nova_proxy.py <nova-novncproxy.conf> <host> <port>`: as nova-novncproxy runs (eventlet
monkey patching first, nova/cmd/novncproxy.py), nova's RFBSecurityProxy (nova/console/securityproxy/rfb.py)
stands between this client, which plays noVNC in the browser, and the VNC server, with the [vnc]
options of the given file (auth_schemes, vencrypt_*). The client speaks RFB 3.8, takes the security
type the proxy offers it, then asks for the desktop (ClientInit) and reads ServerInit. Prints one
JSON line: ok (ServerInit read), the types the proxy offered the client, the desktop's size and
name, the TLS version and the SHA-256 of the certificate the VNC server served, or the error.
"""

from nova import monkey_patch

monkey_patch.patch()

import hashlib  # noqa: E402
import json  # noqa: E402
import socket  # noqa: E402
import struct  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402

import nova.conf  # noqa: E402
from nova.console.securityproxy import rfb  # noqa: E402

TIMEOUT = 20


# Its own copy of tools/cloud/socket_read.py's read_exact: this file is copied alone into a node's state
# directory and run by nova's venv there, where the repository's modules are not importable.
def recv_exact(sock, size):
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return data


def pump(source, target):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass


def main():
    conf, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    nova.conf.CONF(["--config-file", conf], project="nova", default_config_files=[])
    facts = {"ok": False, "reached": ""}
    tenant, proxy_side = socket.socketpair()
    tenant.settimeout(TIMEOUT)

    def client():
        try:
            version = recv_exact(tenant, 12)
            tenant.sendall(b"RFB 003.008\n")
            count = recv_exact(tenant, 1)[0]
            types = list(recv_exact(tenant, count)) if count else []
            facts["tenant_security_types"] = types
            tenant.sendall(bytes([1]))  # None, what the proxy offers
            result = struct.unpack("!I", recv_exact(tenant, 4))[0]
            facts["reached"] = f"SecurityResult {result}"
            if result != 0:
                length = struct.unpack("!I", recv_exact(tenant, 4))[0]
                facts["error"] = recv_exact(tenant, length).decode(errors="replace")
                return
            tenant.sendall(bytes([1]))  # ClientInit, shared
            header = recv_exact(tenant, 24)
            width, height = struct.unpack("!HH", header[:4])
            name = recv_exact(tenant, struct.unpack("!I", header[20:24])[0]).decode()
            facts.update(reached="ServerInit", version=version.decode().strip(), width=width, height=height, name=name,
                         ok=True)  # fmt: skip
        except Exception as error:  # reported, the proxy's side says why
            facts.setdefault("error", f"client: {error!r}")

    talking = threading.Thread(target=client, daemon=True)
    talking.start()
    try:
        compute = socket.create_connection((host, port), timeout=TIMEOUT)
        secured = rfb.RFBSecurityProxy().connect(proxy_side, compute)
        if hasattr(secured, "getpeercert"):
            facts["tls"] = secured.version()
            facts["served"] = hashlib.sha256(secured.getpeercert(binary_form=True)).hexdigest()
        for source, target in ((secured, proxy_side), (proxy_side, secured)):
            threading.Thread(target=pump, args=(source, target), daemon=True).start()
    except Exception as error:
        facts["error"] = f"proxy: {error!r}"
        proxy_side.close()
    talking.join(TIMEOUT)
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
