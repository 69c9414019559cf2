"""Routing rules (pure): keywords, regular expressions, card skill tags, priority, declaration order."""

from __future__ import annotations

import pytest

from parley.agents.base import RunContext
from parley.hub.delegation import lineage, normalise_url, url_label
from parley.hub.routing import RoutingRule, select_rule
from parley.protocol import models as m


def pick(rules: list[RoutingRule], text: str, agent: str | None = "desk",
         tags: dict[str, set[str] | None] | None = None) -> str | None:
    choice = select_rule(rules, text, agent_id=agent, target_tags=tags)
    return choice[0].to_agent if choice else None


@pytest.mark.parametrize(("text", "hit"), [
    ("I need an INVOICE copy", True),  # case-insensitive
    ("invoice", True),
    ("invoices please", False),  # keywords are whole words
    ("reinvoice", False),
    ("about my invoice.", True),  # punctuation is a boundary
])
def test_keywords_match_whole_words_case_insensitively(text: str, hit: bool) -> None:
    rule = RoutingRule("desk", "billing", keywords=["invoice"])
    assert (rule.match(text) is not None) is hit


def test_keyword_phrases() -> None:
    rule = RoutingRule("desk", "billing", keywords=["credit card"])
    assert rule.match("my Credit Card was charged") == "keyword 'credit card'"
    assert rule.match("a card for credit") is None


def test_regular_expressions_search_as_written() -> None:
    rule = RoutingRule("desk", "tech", regex=[r"error \d{3}\b", r"(?i)^crash"])
    assert rule.match("I get error 503 on login") == r"regex 'error \d{3}\b'"
    assert rule.match("CRASH on start") == "regex '(?i)^crash'"
    assert rule.match("Error 503") is None  # as written: case-sensitive
    assert rule.match("error 5034") is None


def test_a_bad_regular_expression_is_refused_up_front() -> None:
    with pytest.raises(ValueError, match="not a valid regular expression"):
        RoutingRule("desk", "tech", regex=["(unclosed"])


def test_tags_count_when_the_target_card_advertises_them() -> None:
    rule = RoutingRule("desk", "claims", tags=["warranty", "billing"])
    card = {"warranty", "repair"}
    assert rule.match("my warranty expired", card) == "tag 'warranty'"
    assert rule.match("warranties", card) is None  # only a plain trailing s
    assert rule.match("two warrantys", card) == "tag 'warranty'"
    assert rule.match("a billing question", card) is None  # not on the card
    assert rule.match("a billing question", None) == "tag 'billing'"  # card unknown: the listed tags stand


def test_star_tag_means_every_tag_on_the_target_card() -> None:
    rule = RoutingRule("desk", "claims", tags=["*"])
    assert rule.match("needs a Repair", {"warranty", "repair"}) == "tag 'repair'"
    assert rule.match("needs a repair", None) is None
    assert rule.match("hello", {"warranty"}) is None


def test_highest_priority_wins_then_declaration_order() -> None:
    rules = [
        RoutingRule("desk", "first", keywords=["refund"]),
        RoutingRule("desk", "second", keywords=["refund"]),
        RoutingRule("desk", "urgent", regex=["(?i)urgent"], priority=10),
        RoutingRule("desk", "low", keywords=["refund"], priority=-1),
    ]
    assert pick(rules, "refund please") == "first"
    assert pick(rules, "URGENT refund") == "urgent"
    assert pick(rules[1:], "refund") == "second"
    assert pick([rules[3]], "refund") == "low"
    assert pick(rules, "nothing to see") is None


def test_priority_applies_across_kinds_of_condition() -> None:
    rules = [RoutingRule("desk", "by-tag", tags=["warranty"], priority=1),
             RoutingRule("desk", "by-keyword", keywords=["warranty"])]
    assert pick(rules, "warranty", tags={"by-tag": {"warranty"}}) == "by-tag"
    assert pick(rules, "warranty", tags={"by-tag": set()}) == "by-keyword"


def test_rules_apply_to_their_from_agent_only() -> None:
    rules = [RoutingRule("other", "x", keywords=["go"], priority=5),
             RoutingRule(None, "anyone", keywords=["go"]),
             RoutingRule("*", "star", keywords=["go"], priority=-5)]
    assert pick(rules, "go", agent="desk") == "anyone"
    assert pick(rules, "go", agent="other") == "x"
    assert pick(rules[2:], "go", agent="desk") == "star"
    assert pick(rules, "go", agent=None) == "x"  # no agent given: every rule counts


def test_a_rule_without_conditions_matches_everything() -> None:
    rule = RoutingRule("desk", "all")
    assert rule.unconditional
    assert rule.match("anything at all") == "every message"


def test_url_helpers() -> None:
    assert normalise_url("HTTP://Example.COM:80/a2a/x/") == "http://example.com:80/a2a/x"
    assert normalise_url("http://h/a2a/x/.well-known/agent-card.json") == "http://h/a2a/x"
    assert url_label("http://h/a2a/billing") == "billing"
    assert url_label("http://h:1/.well-known/agent-card.json") == "h:1"
    assert url_label("https://h/agents/claims") == "claims"


def ctx_with(metadata: dict | None) -> RunContext:
    msg = m.Message(message_id="1", role=m.Role.USER, parts=[m.Part(text="hi")], metadata=metadata)
    return RunContext(task_id="t", context_id="c", message=msg, history=[msg], agent_id="a", owner="o")


def test_lineage_reads_the_chain_and_never_trusts_a_smaller_depth() -> None:
    assert lineage(ctx_with(None)) == ([], 0)
    assert lineage(ctx_with({"parley": {"chain": ["u1", "u2"], "depth": 2}})) == (["u1", "u2"], 2)
    assert lineage(ctx_with({"parley": {"chain": ["u1", "u2"], "depth": -7}})) == (["u1", "u2"], 2)
    assert lineage(ctx_with({"parley": {"chain": ["u1"], "depth": 4}})) == (["u1"], 4)
    assert lineage(ctx_with({"parley": "junk"})) == ([], 0)
