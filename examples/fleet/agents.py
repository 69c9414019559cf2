"""The agents of the example fleet: a front desk and two specialists, no LLM needed.

    front-desk  answers greetings; its routes (parley.toml) send billing and technical
                questions to the specialists
    billing     asks for the invoice number (input-required), then asks support to
                confirm the fault before approving a refund: a message can cross all three
    support     diagnoses a device from the words of the message
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from parley.agents.base import AgentOutput, RunContext

INVOICE = re.compile(r"\bINV-\d+\b", re.IGNORECASE)


async def front_desk(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Greets, and explains what the specialists can do (routes do the forwarding)."""
    yield ("Hello! I route billing questions (invoices, refunds) to billing and technical problems "
           "(broken, error, crash) to support. What can I do for you?")


async def billing(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Refunds: needs an invoice number, and support's confirmation that the device is faulty."""
    said = " ".join(msg.text() for msg in ctx.history if msg.role.value == "ROLE_USER")
    found = INVOICE.search(said)
    delegation = ctx.resume_delegation(finish=False)  # support asked the user something last turn
    if delegation is None:
        if found is None:
            yield ctx.ask("Which invoice is this about? (e.g. INV-1042)")
            return
        yield ctx.say(f"Invoice {found.group(0).upper()} found; asking support to confirm the fault.")
        delegation = ctx.delegate("support", f"Please confirm the fault for a refund: {said}", finish=False)
    async for out in delegation:  # progress, support's artifacts, or support's question
        yield out
    result = delegation.result
    if result is not None and result.ok:
        yield f"Refund approved for {found.group(0).upper() if found else 'your invoice'}: support confirmed the fault."
    elif result is not None:
        yield ctx.fail(f"Refund not approved: support could not confirm the fault ({result.text})")


async def support(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Diagnoses from keywords; asks which device when the message does not say."""
    text = " ".join(msg.text() for msg in ctx.history if msg.role.value == "ROLE_USER").lower()
    device = next((d for d in ("router", "laptop", "phone", "printer") if d in text), None)
    if device is None:
        yield ctx.ask("Which device is affected: router, laptop, phone or printer?")
        return
    yield f"Diagnosis: the {device} has a hardware fault (confirmed by support)."
