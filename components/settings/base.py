"""The base of every settings model: camelCase keys, unknown keys refused, nested defaults kept.

Its own module so that the settings of one part of the cloud (components/settings/ceph.py,
components/settings/gateway.py) can be declared beside components/settings/model.py, which gathers
them into `Settings`, without importing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel


class Model(BaseModel):
    """Stack files use camelCase keys; unknown keys are errors, so typos do not pass silently.

    The program builds defaults by field name (`Purge(schedule=...)`); a stack's keys are read by
    their camelCase alias only (`Settings.parse`), so `vm_safe` beside `vmSafe` is an unknown key,
    not a second spelling of the same setting.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _keep_nested_defaults(cls, data: Any) -> Any:
        """A nested setting given in part keeps the rest of its default: `operators.mariadb:
        {install: false}` keeps the default chartVersion, rather than demanding it."""
        if not isinstance(data, Mapping):
            return data
        merged = dict(data)
        for name, field in cls.model_fields.items():
            key = field.alias or name
            if isinstance(field.default, BaseModel) and isinstance(data.get(key), Mapping):
                default = field.default.model_dump(by_alias=True, exclude_unset=True)
                merged[key] = {**default, **data[key]}
        return merged
