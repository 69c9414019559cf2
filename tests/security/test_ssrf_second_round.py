"""Adversarial pass, second round (docs/security.md): webhook addresses the first round's guard still let through
(A2A 1.0 §13.2: agents SHOULD validate webhook URLs against SSRF). `::ffff:0:a.b.c.d` is SIIT's IPv4-translated
form (RFC 2765 §2.1): a translator sends it to the IPv4 address it carries, so it is judged by that address,
like the mapped, compatible, NAT64 and 6to4 forms. `fec0::/10` is the deprecated site-local range (RFC 3879),
still routed inside some networks: never a public webhook. On main both were accepted."""

from __future__ import annotations

import pytest

from parley.push.ssrf import UnsafeUrl, UrlGuard, parse_allow


@pytest.mark.parametrize(("url", "named"), [
    ("http://[::ffff:0:127.0.0.1]/hook", "127.0.0.1"),
    ("http://[::ffff:0:a9fe:a9fe]/hook", "169.254.169.254"),
    ("http://[::ffff:0:a00:5]/hook", "10.0.0.5"),
    ("http://[fec0::1]/hook", "fec0::1"),
])
async def test_translated_and_site_local_addresses_are_refused(url, named):
    with pytest.raises(UnsafeUrl) as refused:
        await UrlGuard().check(url)
    assert named in str(refused.value)


async def test_translated_form_of_a_public_address_is_accepted():
    """Judged by the address it carries: a public one passes, so the rule is not a blanket refusal."""
    target = await UrlGuard().check("https://[::ffff:0:5db8:d822]/hook")
    assert target.address == "::ffff:0:5db8:d822"
    allowed = UrlGuard(parse_allow(["10.0.0.0/8"]))
    assert (await allowed.check("http://[::ffff:0:a00:5]/hook")).address == "::ffff:0:a00:5"
