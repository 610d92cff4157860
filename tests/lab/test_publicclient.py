"""The laptop's client pieces: RFC 6455's handshake and frames, and which links of a version document count."""

from __future__ import annotations

import socket

from tests.lab.cloud.publicclient import absolute_links, accept_key, frame, read_frame


def test_the_websocket_accept_key_is_rfc_6455s() -> None:
    assert accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # RFC 6455, section 1.3


def test_frames_are_read_back_whole_short_and_long() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        for payload in (b"RFB 003.008\n", b"x" * 300):
            ours.sendall(frame(payload))
            assert read_frame(theirs) == (2, payload)
    # A client's frame is masked (RFC 6455 5.3).
    ours, theirs = socket.socketpair()
    with ours, theirs:
        mask = b"\x01\x02\x03\x04"
        ours.sendall(bytes([0x82, 0x80 | 3]) + mask + bytes(b ^ mask[i] for i, b in enumerate(b"RFB")))
        assert read_frame(theirs) == (2, b"RFB")


def test_only_the_apis_own_absolute_links_count() -> None:
    versions = {"versions": [{"id": "v3.0", "links": [
        {"rel": "describedby", "type": "text/html", "href": "https://docs.openstack.org/"},
        {"rel": "self", "href": "https://cinderv3.cloud.example.com/v3/"},
    ]}, {"id": "v1.0", "links": [{"rel": "self", "href": ""}]}]}  # fmt: skip
    assert absolute_links(versions) == ["https://cinderv3.cloud.example.com/v3/"]
    assert absolute_links({"version": {"links": [{"rel": "self", "href": "http://keystone-api:5000/v3/"}]}}) == [
        "http://keystone-api:5000/v3/"
    ]
