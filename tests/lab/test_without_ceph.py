"""Until the lab starts its Ceph stand-in, a stack that uses Ceph runs there on files and LVM, and says so."""

from __future__ import annotations

from components.stack_config import settings_from_config
from tools.cloud.run import machine_overrides, without_ceph
from tools.runtime import stack_config, stack_with


def test_prod_runs_in_the_lab_without_ceph_and_staging_as_it_is() -> None:
    assert without_ceph(stack_config("staging")) == {}
    settings = settings_from_config(stack_with(stack_config("prod"), machine_overrides("prod", "qemu")))
    assert settings.ceph_users() == {}  # nothing waits for a keyring Secret the lab does not make
    assert (settings.glance.backend, settings.cinder.backend, settings.cinder.backup) == ("file", "lvm", "none")
    # Glance's three replicas share their claim: the class prod gives its dumps (ReadWriteMany).
    assert settings.storage.class_for("images") == "cephfs"
    # The rest of prod's settings stay.
    assert settings.storage.class_for("database") == "ceph-rbd" and settings.compute.vm_safe
