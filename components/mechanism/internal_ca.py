"""Which internal CAs a stack has, which of them every client trusts, and which one issues.

Without a rotation there is one CA: the program's root `internal-ca` (`tls.internal.selfSigned`;
`generation: N` makes it `internal-ca-N`) or the CA behind the stack's issuer (`tls.internal.issuer`).
It issues every certificate of the cluster and is the only one in the clients' bundle.

`tls.internal.rotation` replaces it in phases, each one `pulumi up` (README, "Rotating the internal
CA"): the CA being replaced is the previous generation (selfSigned) or `rotation.previousIssuer`.
- `trust`: the new CA exists and every bundle holds both; the previous CA still issues.
- `issue`: the new CA issues every certificate again (cert-manager re-issues each one whose issuer
  changed); both stay trusted, so a server still presenting the previous CA's certificate is accepted.
- the rotation removed: the bundle holds the new CA only, and the previous root and its Issuers go.
A client that has both CAs accepts a certificate of either, whichever one a server presents in
between (tests/real/test_ca_rotation.py), which is why no phase breaks a connection.

Each trusted CA has a Certificate of its own (`<root>-trust`, or `internal-ca-trust-<issuer>`) whose
only use is its Secret's `ca.crt`: cert-manager writes there the CA of the issuer, the root of the
chain (as it did for `internal-ca-bundle` before). Its key pair is good for no TLS peer (e-mail
protection only), and the Secret holds no CA key, so the Job that writes the bundle may read it
(components/infrastructure/ca_rotation.py). The same holds for an issuer the stack names, whose CA Secret the
program never sees.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.mechanism.certificates import issuer as issuer_ref
from components.settings.gateway import INTERNAL_CA, InternalTls, IssuerRef

ROOT = INTERNAL_CA  # the program's first root, its Secret and the CA Issuer it backs (generation 1)


@dataclass(frozen=True)
class Ca:
    """One internal CA: the issuer that signs with it and the Certificate whose `ca.crt` is its certificate."""

    issuer: dict[str, str]  # a cert-manager issuerRef
    shown: str  # how the README and --against name it: the root's name, or "<Kind> <name>"
    trust: str  # the Certificate and Secret whose ca.crt the bundle Job reads
    root: str | None = None  # the program's root (Certificate, Secret and CA Issuer of this name); None: the stack's


def root_name(generation: int) -> str:
    return ROOT if generation == 1 else f"{ROOT}-{generation}"


def own_ca(generation: int) -> Ca:
    root = root_name(generation)
    return Ca(issuer_ref("Issuer", root), root, f"{root}-trust", root)


def stack_ca(ref: IssuerRef) -> Ca:
    return Ca(issuer_ref(ref.kind, ref.name), f"{ref.kind} {ref.name}", f"{ROOT}-trust-{ref.name}")


@dataclass(frozen=True)
class CaPhase:
    """The internal CAs of one `pulumi up`: those trusted (the one being replaced first) and the one that issues."""

    trusted: tuple[Ca, ...]
    signer: Ca
    phase: str | None = None  # the rotation's phase; None: no rotation under way

    @property
    def roots(self) -> tuple[str, ...]:
        """The roots the program makes (and keeps): those of its own CAs that are trusted."""
        return tuple(ca.root for ca in self.trusted if ca.root)

    @property
    def previous(self) -> Ca | None:
        return self.trusted[0] if len(self.trusted) > 1 else None

    @property
    def current(self) -> Ca:
        """The CA the stack moves to (or has): the last trusted."""
        return self.trusted[-1]

    def trusted_marker(self) -> str | None:
        """What the pods that read the CA file once carry on their template, so that a change of the trusted
        CAs restarts them (components/infrastructure/ca_rotation.py); None where it is what every stack had before
        rotations existed (one CA, internal-ca or the stack's issuer's), which leaves their templates as
        they were."""
        if self.phase is None and self.current.root in (None, ROOT):
            return None
        return ",".join(ca.trust for ca in self.trusted)


def ca_phase(internal: InternalTls) -> CaPhase:
    """The CAs of the settings (which components/settings/gateway.py `problems` has checked); internal
    TLS must name a CA."""
    assert internal.enabled, "plain text has no CA"
    if internal.self_signed:
        new = own_ca(internal.generation)
        previous = own_ca(internal.generation - 1) if internal.rotation and internal.generation > 1 else None
    else:
        assert internal.issuer is not None
        new = stack_ca(internal.issuer)
        rotation = internal.rotation
        previous = stack_ca(rotation.previous_issuer) if rotation and rotation.previous_issuer else None
    if previous is None or internal.rotation is None:
        return CaPhase((new,), new)
    phase = internal.rotation.phase
    return CaPhase((previous, new), previous if phase == "trust" else new, phase)
