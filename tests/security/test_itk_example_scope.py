"""Adversarial pass, second round (docs/security.md): the ITK example agent calls any card URL and webhook an
instruction names, with no authentication; its README must say, before how to run it, that it is for test
clusters only and must stay on loopback (on main it did not say so)."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parents[2] / "examples" / "itk" / "README.md"


def test_itk_readme_says_test_clusters_only_before_how_to_run_it():
    text = README.read_text()
    warning = text.find("**For test clusters only.**")
    assert warning != -1, "examples/itk/README.md does not say the agent is for test clusters only"
    assert warning < text.find("## How the kit runs it")
    paragraph = text[warning:text.find("\n\n", warning)]
    for fact in ("any agent card URL", "webhook", "no credentials", "127.0.0.1", "never on a shared or public address"):
        assert fact in paragraph, fact
