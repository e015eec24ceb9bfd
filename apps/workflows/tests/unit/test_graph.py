"""The workflow graph's SVG (apps/workflows/graph.py): depth columns, escaped text, links, and a
picture of 50 jobs that stays a readable size. Pure: no database."""

from __future__ import annotations

import re

from jobweaver.workflows.graph import GraphNode, columns, svg

DIAMOND = [
    GraphNode("extract", "COMPLETED", ()),
    GraphNode("left", "RUNNING", ("extract",), "/admin/job/1/"),
    GraphNode("right", "FAILED", ("extract",)),
    GraphNode("merge", "CANCELLED", ("left", "right")),
]


def test_each_job_sits_one_column_right_of_its_deepest_dependency():
    assert columns(DIAMOND) == {"extract": 0, "left": 1, "right": 1, "merge": 2}
    chain = [GraphNode("c", "WAITING", ("b",)), GraphNode("b", "WAITING", ("a",))]
    assert columns([*chain, GraphNode("a", "PENDING", ())]) == {"a": 0, "b": 1, "c": 2}


def test_the_svg_has_a_node_per_job_an_edge_per_dependency_and_links():
    drawn = svg(DIAMOND)
    assert drawn.startswith("<svg") and drawn.endswith("</svg>")
    assert re.findall(r'data-ref="([^"]+)" data-status="([^"]+)"', drawn) == [
        ("extract", "COMPLETED"),
        ("left", "RUNNING"),
        ("right", "FAILED"),
        ("merge", "CANCELLED"),
    ]
    assert drawn.count("<path ") == 4
    assert '<a href="/admin/job/1/">' in drawn


def test_every_text_is_escaped():
    drawn = svg([GraphNode('<script>"x"', "PENDING", (), 'javascript:"a"')])
    assert "<script>" not in drawn
    assert "&lt;script&gt;&quot;x&quot;" in drawn


def test_fifty_jobs_make_a_picture_that_fits_a_page_width():
    nodes = [GraphNode(f"p{n}", "COMPLETED", ()) for n in range(49)]
    nodes.append(GraphNode("join", "PENDING", tuple(node.ref for node in nodes)))
    width, height = map(int, re.search(r'width="(\d+)" height="(\d+)"', svg(nodes)).groups())
    assert width < 600  # two columns
    assert height < 49 * 50  # one row per job of the widest column, no more
