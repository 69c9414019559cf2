"""The security parts of an agent card in A2A 0.3 form (sans-IO), for every 0.3 card Parley serves.

A2A 1.0 wraps each security scheme in a one-of (`{"apiKeySecurityScheme": {...}}`) and each
requirement in `{"schemes": {name: {"list": [scopes]}}}`; A2A 0.3 uses the OpenAPI shapes
(`{"type": "apiKey", "in": "header", "name": ...}`) and `security: [{name: [scopes]}]`. The
well-known card served to 0.3 clients and the 0.3 HTTP+JSON `GET /v1/card` both convert here; Parley's
client reads a 0.3 card's security back into 1.0 form (:func:`security_from_v03`).
"""

from __future__ import annotations

from typing import Any


def scheme_to_v03(scheme: dict[str, Any]) -> dict[str, Any]:
    """One 1.0 SecurityScheme as a 0.3 (OpenAPI) security scheme object."""
    if "apiKeySecurityScheme" in scheme:
        s = scheme["apiKeySecurityScheme"]
        return _described({"type": "apiKey", "in": s.get("location", "header"), "name": s.get("name", "")}, s)
    if "httpAuthSecurityScheme" in scheme:
        s = scheme["httpAuthSecurityScheme"]
        out = {"type": "http", "scheme": str(s.get("scheme", "")).lower()}
        if s.get("bearerFormat"):
            out["bearerFormat"] = s["bearerFormat"]
        return _described(out, s)
    if "openIdConnectSecurityScheme" in scheme:
        s = scheme["openIdConnectSecurityScheme"]
        return _described({"type": "openIdConnect", "openIdConnectUrl": s.get("openIdConnectUrl", "")}, s)
    if "oauth2SecurityScheme" in scheme:
        s = scheme["oauth2SecurityScheme"]
        return _described({"type": "oauth2", "flows": s.get("flows", {})}, s)
    if "mtlsSecurityScheme" in scheme:
        return _described({"type": "mutualTLS"}, scheme["mtlsSecurityScheme"])
    return dict(scheme)  # already 0.3-shaped, or unknown: as it is


def requirement_to_v03(requirement: dict[str, Any]) -> dict[str, list[str]]:
    """One 1.0 SecurityRequirement as a 0.3 security requirement (scheme name -> scopes)."""
    schemes = requirement.get("schemes", requirement)
    out: dict[str, list[str]] = {}
    for name, value in schemes.items():
        out[name] = list(value.get("list", [])) if isinstance(value, dict) else list(value or [])
    return out


def security_to_v03(card_json: dict[str, Any]) -> dict[str, Any]:
    """`card_json` (a card in 1.0 JSON) with its security schemes and requirements, and its skills',
    in 0.3 form: `securitySchemes` converted, `securityRequirements` as `security`."""
    out = dict(card_json)
    if out.get("securitySchemes"):
        out["securitySchemes"] = {name: scheme_to_v03(s) for name, s in out["securitySchemes"].items()}
    if "securityRequirements" in out:
        out["security"] = [requirement_to_v03(r) for r in out.pop("securityRequirements") or []]
    skills = []
    for skill in out.get("skills", []):
        s = {k: v for k, v in skill.items() if k != "securityRequirements"}
        if skill.get("securityRequirements"):
            s["security"] = [requirement_to_v03(r) for r in skill["securityRequirements"]]
        skills.append(s)
    if "skills" in out:
        out["skills"] = skills
    return out


def scheme_from_v03(scheme: dict[str, Any]) -> dict[str, Any]:
    """One 0.3 (OpenAPI) security scheme as a 1.0 SecurityScheme (a 1.0-shaped one is kept as it is)."""
    kind = scheme.get("type")
    if kind == "apiKey":
        out = {"location": scheme.get("in", "header"), "name": scheme.get("name", "")}
        return {"apiKeySecurityScheme": _described(out, scheme)}
    if kind == "http":
        out = {"scheme": scheme.get("scheme", "")}
        if scheme.get("bearerFormat"):
            out["bearerFormat"] = scheme["bearerFormat"]
        return {"httpAuthSecurityScheme": _described(out, scheme)}
    if kind == "openIdConnect":
        return {"openIdConnectSecurityScheme": _described({"openIdConnectUrl": scheme.get("openIdConnectUrl", "")},
                                                           scheme)}
    if kind == "oauth2":
        return {"oauth2SecurityScheme": _described({"flows": scheme.get("flows", {})}, scheme)}
    if kind == "mutualTLS":
        return {"mtlsSecurityScheme": _described({}, scheme)}
    return dict(scheme)


def requirement_from_v03(requirement: dict[str, Any]) -> dict[str, Any]:
    """One 0.3 security requirement (scheme name -> scopes) as a 1.0 SecurityRequirement."""
    if "schemes" in requirement and isinstance(requirement["schemes"], dict):
        return requirement  # already 1.0-shaped
    return {"schemes": {name: {"list": list(scopes or [])} for name, scopes in requirement.items()}}


def security_from_v03(card_json: dict[str, Any]) -> dict[str, Any]:
    """`card_json` (a 0.3 card) with its security in 1.0 form: the inverse of :func:`security_to_v03`."""
    out = dict(card_json)
    schemes = out.get("securitySchemes")
    if isinstance(schemes, dict):
        out["securitySchemes"] = {name: scheme_from_v03(s) for name, s in schemes.items() if isinstance(s, dict)}
    security = out.pop("security", None)
    if isinstance(security, list) and "securityRequirements" not in out:
        out["securityRequirements"] = [requirement_from_v03(r) for r in security if isinstance(r, dict)]
    skills = []
    for skill in out.get("skills") or []:
        if isinstance(skill, dict):
            skill = dict(skill)
            reqs = skill.pop("security", None)
            if isinstance(reqs, list) and "securityRequirements" not in skill:
                skill["securityRequirements"] = [requirement_from_v03(r) for r in reqs if isinstance(r, dict)]
        skills.append(skill)
    if "skills" in out:
        out["skills"] = skills
    return out


def _described(out: dict[str, Any], source: dict[str, Any]) -> dict[str, Any]:
    if source.get("description"):
        out["description"] = source["description"]
    return out


__all__ = ["requirement_from_v03", "requirement_to_v03", "scheme_from_v03", "scheme_to_v03", "security_from_v03",
           "security_to_v03"]
