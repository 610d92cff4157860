"""Draws the deploy graph: graph.svg (drawsvg) and a Mermaid flowchart in graph.md.

The SVG is laid out from the plan's own waves, so it needs no layout engine: one column
per wave, left to right, and one lane per service, top to bottom, in the order services
start deploying. An arrow runs from what is waited for to what waits.
"""

from __future__ import annotations

from collections import Counter

import drawsvg as draw

from tools.plan_graph import DeployGraphView, Node

COLUMN, BOX_WIDTH, BOX_HEIGHT, ROW = 250, 222, 24, 30
LEFT, TOP, LANE_GAP, MARGIN = 120, 64, 10, 16
FONT = "DejaVu Sans Mono, Menlo, Consolas, monospace"
# Fill and border by kind: Jobs run once, workloads keep running, the rest are data stores
# and operators.
COLORS = {
    "Job": ("#fff4c2", "#b08800"),
    "CronJob": ("#fff4c2", "#b08800"),
    "Deployment": ("#dbeafe", "#1d4ed8"),
    "DaemonSet": ("#dcfce7", "#15803d"),
    "StatefulSet": ("#ede9fe", "#6d28d9"),
    "MariaDB": ("#ede9fe", "#6d28d9"),
    "RabbitmqCluster": ("#ede9fe", "#6d28d9"),
}
OPERATOR = ("#f3f4f6", "#4b5563")
MERMAID_CLASSES = {
    "job": ("Job", "CronJob"),
    "deployment": ("Deployment",),
    "daemonset": ("DaemonSet",),
    "store": ("StatefulSet", "MariaDB", "RabbitmqCluster"),
}


def _label(node: Node) -> str:
    # A CronJob may share its name with the Job of the same step (nova-cell-setup).
    return f"{node.name} (CronJob)" if node.kind == "CronJob" else node.name


LEGEND = (("Job", "Job"), ("Deployment", "Deployment"), ("DaemonSet", "DaemonSet"), ("StatefulSet", "data store"))


def _layout(graph: DeployGraphView) -> tuple[dict[str, tuple[float, float]], dict[str, tuple[float, int]], float]:
    """Top-left corner of every node's box; each lane's top and row count; the total height."""
    columns = {wave: i for i, wave in enumerate(graph.waves)}
    rows = Counter((n.service, n.wave) for n in graph.nodes)
    lanes: dict[str, tuple[float, int]] = {}
    y: float = TOP
    for service in graph.services:
        count = max(c for (s, _), c in rows.items() if s == service)
        lanes[service] = (y, count)
        y += count * ROW + LANE_GAP
    placed: Counter[tuple[str, int]] = Counter()
    corners: dict[str, tuple[float, float]] = {}
    for node in graph.nodes:
        row = placed[(node.service, node.wave)]
        placed[(node.service, node.wave)] += 1
        lane_top = lanes[node.service][0]
        corners[node.urn] = (LEFT + columns[node.wave] * COLUMN, lane_top + LANE_GAP / 2 + row * ROW)
    return corners, lanes, y + MARGIN


def svg(graph: DeployGraphView, title: str) -> str:
    corners, lanes, height = _layout(graph)
    width = LEFT + len(graph.waves) * COLUMN + MARGIN
    drawing = draw.Drawing(width, height, font_family=FONT, font_size=11)
    drawing.append(draw.Rectangle(0, 0, width, height, fill="white"))
    drawing.append(draw.Text(title, 15, MARGIN, 24, font_weight="bold"))
    arrow = draw.Marker(-6, -4, 1, 4, scale=1, orient="auto")
    arrow.append(draw.Lines(-6, -4, 0, 0, -6, 4, close=True, fill="#6b7280"))
    for i, (service, (top, count)) in enumerate(lanes.items()):
        shade = "#f9fafb" if i % 2 else "#f1f5f9"
        drawing.append(draw.Rectangle(0, top, width, count * ROW + LANE_GAP, fill=shade))
        drawing.append(draw.Text(service, 12, MARGIN, top + LANE_GAP / 2 + ROW / 2 + 4, font_weight="bold"))
    for i, (kind, text) in enumerate((*LEGEND, ("", "operator"))):
        fill, stroke = COLORS.get(kind, OPERATOR)
        x: float = width - MARGIN - (len(LEGEND) + 1 - i) * 110
        drawing.append(draw.Rectangle(x, 12, 14, 14, rx=3, fill=fill, stroke=stroke))
        drawing.append(draw.Text(text, 11, x + 20, 23))
    for i, wave in enumerate(graph.waves):
        drawing.append(draw.Text(f"wave {wave}", 12, LEFT + i * COLUMN + BOX_WIDTH / 2, TOP - 12, text_anchor="middle"))
    for source, target in graph.edges:
        (x1, y1), (x2, y2) = corners[source.urn], corners[target.urn]
        x1, y1, x2, y2 = x1 + BOX_WIDTH, y1 + BOX_HEIGHT / 2, x2 - 2, y2 + BOX_HEIGHT / 2
        bend = (x2 - x1) / 2
        path = draw.Path(stroke="#6b7280", stroke_width=1, stroke_opacity=0.55, fill="none", marker_end=arrow)
        drawing.append(path.M(x1, y1).C(x1 + bend, y1, x2 - bend, y2, x2, y2))
    waits_for = {n.urn: [s.name for s, t in graph.edges if t.urn == n.urn] for n in graph.nodes}
    for node in graph.nodes:
        x, y = corners[node.urn]
        fill, stroke = COLORS.get(node.kind, OPERATOR)
        group = draw.Group(id=f"{node.kind}-{node.name}")
        tip = f"{node.kind} {node.name} (wave {node.wave})"
        if waits_for[node.urn]:
            tip += f", after {', '.join(waits_for[node.urn])}"
        group.append_title(tip)
        group.append(draw.Rectangle(x, y, BOX_WIDTH, BOX_HEIGHT, rx=5, fill=fill, stroke=stroke))
        group.append(draw.Text(_label(node), 11, x + 6, y + BOX_HEIGHT / 2 + 4))
        drawing.append(group)
    return drawing.as_svg()


def mermaid(graph: DeployGraphView) -> str:
    """A `flowchart LR` with a subgraph per service; node ids are n0, n1, ... (names have dashes)."""
    ids = {n.urn: f"n{i}" for i, n in enumerate(graph.nodes)}
    lines = ["flowchart LR"]
    for i, service in enumerate(graph.services):
        lines.append(f'  subgraph s{i}["{service}"]')
        lines += [
            f'    {ids[n.urn]}["{n.name}<br/>{n.kind} · wave {n.wave}"]' for n in graph.nodes if n.service == service
        ]
        lines.append("  end")
    lines += [f"  {ids[source.urn]} --> {ids[target.urn]}" for source, target in graph.edges]
    fills = {"job": COLORS["Job"], "deployment": COLORS["Deployment"], "daemonset": COLORS["DaemonSet"]}
    fills |= {"store": COLORS["StatefulSet"], "operator": OPERATOR}
    lines += [f"  classDef {name} fill:{fill},stroke:{stroke}" for name, (fill, stroke) in fills.items()]
    for name, kinds in MERMAID_CLASSES.items():
        members = [ids[n.urn] for n in graph.nodes if n.kind in kinds]
        if members:
            lines.append(f"  class {','.join(members)} {name}")
    operators = [ids[n.urn] for n in graph.nodes if n.kind not in COLORS]
    if operators:
        lines.append(f"  class {','.join(operators)} operator")
    return "\n".join(lines)


def markdown(graph: DeployGraphView, stack: str) -> str:
    settings = graph.plan.settings
    waves = [f"| {wave} | {', '.join(_label(n) for n in graph.nodes if n.wave == wave)} |" for wave in graph.waves]
    return "\n".join(
        [
            f"# Deploy graph of stack `{stack}`",
            "",
            f"{len(graph.nodes)} Jobs, workloads, data stores and operators "
            f"({settings.hypervisor_isolation.value}, ha={settings.ha}), grouped by service. "
            "An arrow runs from what is waited for to what waits; arrows that another path implies are "
            f"left out (`python -m tools.plan --stack {stack} --explain NAME` lists every one).",
            "",
            "```mermaid",
            mermaid(graph),
            "```",
            "",
            "| wave | starts when the waves before it are done |",
            "| --- | --- |",
            *waves,
            "",
        ]
    )
