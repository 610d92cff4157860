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

# tests/lab/cloud/socket_read.py, copied beside this file into the node's state directory (standard library only):
# nova's venv there cannot import the repository.
from socket_read import read_exact  # noqa: E402

TIMEOUT = 20


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
            version = read_exact(tenant, 12)
            tenant.sendall(b"RFB 003.008\n")
            count = read_exact(tenant, 1)[0]
            types = list(read_exact(tenant, count)) if count else []
            facts["tenant_security_types"] = types
            tenant.sendall(bytes([1]))  # None, what the proxy offers
            result = struct.unpack("!I", read_exact(tenant, 4))[0]
            facts["reached"] = f"SecurityResult {result}"
            if result != 0:
                length = struct.unpack("!I", read_exact(tenant, 4))[0]
                facts["error"] = read_exact(tenant, length).decode(errors="replace")
                return
            tenant.sendall(bytes([1]))  # ClientInit, shared
            header = read_exact(tenant, 24)
            width, height = struct.unpack("!HH", header[:4])
            name = read_exact(tenant, struct.unpack("!I", header[20:24])[0]).decode()
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
