"""The rules as pulumi-policy policies (built by __main__.py, tested without an engine)."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from policies.k8s import K8sObject
from policies.lists import flatten
from policies.registry import RESOURCE_RULES, STACK_RULES, ResourceRule, StackRule
from policies.settings import PackSettings, schema

PACK_NAME = "openstack-on-k8s"


def _schema(uses: tuple[str, ...]) -> PolicyConfigSchema | None:
    return PolicyConfigSchema(properties=schema(uses)) if uses else None


def resource_policy(rule: ResourceRule) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        settings = PackSettings.from_config(args.get_config(), rule.name)
        for obj in flatten(K8sObject(args.urn, args.resource_type, args.props)):
            if rule.applies(obj):
                for message in rule.check(obj, settings):
                    report_violation(message, None)

    return ResourceValidationPolicy(
        name=rule.name,
        description=rule.description,
        validate=validate,
        enforcement_level=EnforcementLevel(rule.enforcement),
        config_schema=_schema(rule.uses),
    )


def stack_policy(rule: StackRule) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        objects = [
            K8sObject(r.urn, r.resource_type, r.props, tuple(d.urn for d in r.dependencies)) for r in args.resources
        ]
        for urn, message in rule.check(objects, PackSettings.from_config(args.get_config(), rule.name)):
            report_violation(message, urn)

    return StackValidationPolicy(
        name=rule.name,
        description=rule.description,
        validate=validate,
        enforcement_level=EnforcementLevel(rule.enforcement),
        config_schema=_schema(rule.uses),
    )


def build_policies() -> list[ResourceValidationPolicy | StackValidationPolicy]:
    return [resource_policy(r) for r in RESOURCE_RULES] + [stack_policy(r) for r in STACK_RULES]
