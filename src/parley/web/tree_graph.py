"""A task's delegation tree (parley.hub.trace) laid out as a graph for the task page: one box per task (its
agent, state and id), an edge from each task to the tasks it delegated to, parents left of their children. The
page draws it as inline SVG on the server (no script: the CSP holds); the text goes through Jinja's escaping."""

from __future__ import annotations

from typing import Any

NODE_WIDTH, NODE_HEIGHT = 230, 46
GAP_X, GAP_Y = 44, 14
MAX_LABEL = 28  # characters of an agent name or URL shown in a box (the node's title has all of it)


def tree_graph(tree: dict[str, Any]) -> dict[str, Any]:
    """`{"width", "height", "nodes": [...], "edges": [...]}`: each node `{x, y, taskId, agent, state, source,
    depth, title}` (its box's top left), each edge `{d}` (an SVG path from a parent's right side to a child's
    left side). Leaves take rows in order; a parent sits level with the middle of its children."""
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, str]] = []
    rows = 0

    def place(node: dict[str, Any], depth: int) -> float:
        nonlocal rows
        children = node.get("children") or []
        if children:
            ys = [place(child, depth + 1) for child in children]
            y = (ys[0] + ys[-1]) / 2
        else:
            y = rows * (NODE_HEIGHT + GAP_Y)
            rows += 1
        x = depth * (NODE_WIDTH + GAP_X)
        for child_y in ys if children else []:
            x1, y1 = x + NODE_WIDTH, y + NODE_HEIGHT / 2
            x2, y2 = x + NODE_WIDTH + GAP_X, child_y + NODE_HEIGHT / 2
            mid = (x1 + x2) / 2
            edges.append({"d": f"M{x1:g},{y1:g} C{mid:g},{y1:g} {mid:g},{y2:g} {x2:g},{y2:g}"})
        agent = str(node.get("agent") or node.get("url") or "?")
        state = str(node.get("state") or "unknown")
        nodes.append({"x": x, "y": y, "taskId": str(node.get("taskId") or ""), "state": state, "depth": depth,
                      "agent": agent if len(agent) <= MAX_LABEL else agent[: MAX_LABEL - 1] + "…",
                      "source": node.get("source") or "", "title": _title(node, agent, state)})
        return y

    place(tree, 0)
    depth = max((n["depth"] for n in nodes), default=0)
    return {"width": (depth + 1) * (NODE_WIDTH + GAP_X) - GAP_X + 2, "height": rows * (NODE_HEIGHT + GAP_Y) - GAP_Y + 2,
            "nodes": nodes, "edges": edges, "node_width": NODE_WIDTH, "node_height": NODE_HEIGHT}


def _title(node: dict[str, Any], agent: str, state: str) -> str:
    """A node's tooltip and accessible name: agent, state, task id, and why it could not be read, if so."""
    parts = [f"{agent}: {state}", f"task {node.get('taskId') or '?'}"]
    if node.get("error"):
        parts.append(str(node["error"]))
    elif node.get("source") == "hidden":
        parts.append("not visible to you")
    return " · ".join(parts)


__all__ = ["MAX_LABEL", "NODE_HEIGHT", "NODE_WIDTH", "tree_graph"]
