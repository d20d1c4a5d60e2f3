#!/usr/bin/env python3
"""Extracts the schemas an OpenAI Responses create request (or, with ROOT, another request
such as `CreateChatCompletionRequest`) needs from OpenAI's published OpenAPI document into
the projection crate's test fixtures.

Usage: scripts/extract-responses-schema.py OPENAPI_JSON OUT_JSON [ROOT]

Takes ROOT (default `CreateResponse`) and every schema it references, rewrites `#/components/schemas/X` to
`#/$defs/X`, drops what does not constrain a body (descriptions, titles, examples, `x-*`
annotations, `discriminator`), reads `oneOf` as `anyOf` and a 2019-09 `$recursiveRef` as a
`$ref` to its schema (see the fixture's README).
"""
import json
import sys

DROP = {"description", "title", "example", "examples", "discriminator", "deprecated", "default"}


def refs(node, out):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                out.append(value.rsplit("/", 1)[-1])
            else:
                refs(value, out)
    elif isinstance(node, list):
        for value in node:
            refs(value, out)


def clean(node, name, in_properties=False):
    """`name` is the schema being cleaned: a 2019-09 `$recursiveRef` to `#` inside a schema
    with `$recursiveAnchor` becomes a plain `$ref` to that schema (draft 2020-12 has neither)."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if not in_properties and (key in DROP or key.startswith("x-")):
                continue
            if not in_properties and key == "$recursiveAnchor":
                continue
            if not in_properties and key == "$recursiveRef":
                key, value = "$ref", "#/$defs/" + name
            if key == "$ref" and isinstance(value, str):
                value = "#/$defs/" + value.rsplit("/", 1)[-1]
            out["anyOf" if key == "oneOf" and not in_properties else key] = clean(
                value, name, key in ("properties", "patternProperties", "$defs")
            )
        return out
    if isinstance(node, list):
        return [clean(value, name) for value in node]
    return node


def main():
    source, target = sys.argv[1], sys.argv[2]
    root = sys.argv[3] if len(sys.argv) > 3 else "CreateResponse"
    with open(source, encoding="utf-8") as f:
        document = json.load(f)
    schemas = document["components"]["schemas"]
    seen, stack = set(), [root]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        found = []
        refs(schemas[name], found)
        stack.extend(found)
    fixture = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$comment": "Extracted from OpenAI's OpenAPI document, version "
        + document["info"]["version"]
        + " (MIT). See README.md beside this file.",
        "$ref": "#/$defs/" + root,
        "$defs": {name: clean(schemas[name], name) for name in sorted(seen)},
    }
    with open(target, "w", encoding="utf-8") as f:
        json.dump(fixture, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
