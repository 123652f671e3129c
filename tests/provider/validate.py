"""Validates what the provider layer emits against the providers' own Python SDK types.

Reads JSON Lines on stdin, one object per line: {"provider", "kind", "label", "body"}; `kind` is
`request` (a request body the layer built) or `response` / `chunk` (a scripted provider answer).
Request bodies are checked with pydantic TypeAdapters over the SDKs' request TypedDicts; a key the
type does not declare is a failure (TypedDicts would otherwise drop it silently). Prints one line
per failure and a summary; exits 1 when anything failed.
"""

import json
import sys
from collections.abc import Iterator

import anthropic.types as anthropic_types
import openai.types.chat as chat_types
import openai.types.responses as responses_types
from anthropic.types import message_create_params
from google.genai import types as gemini_types
from openai.types.chat import completion_create_params
from openai.types.responses import response_create_params
from pydantic import TypeAdapter

REQUESTS = {
    "openai-chat": TypeAdapter(completion_create_params.CompletionCreateParamsNonStreaming),
    "openai-responses": TypeAdapter(response_create_params.ResponseCreateParamsNonStreaming),
    "anthropic": TypeAdapter(message_create_params.MessageCreateParamsNonStreaming),
}
RESPONSES = {
    "openai-chat": TypeAdapter(chat_types.ChatCompletion),
    "openai-responses": TypeAdapter(responses_types.Response),
    "anthropic": TypeAdapter(anthropic_types.Message),
    "gemini": TypeAdapter(gemini_types.GenerateContentResponse),
}
CHUNKS = {
    "openai-chat": TypeAdapter(chat_types.ChatCompletionChunk),
    "anthropic": TypeAdapter(anthropic_types.RawMessageStreamEvent),
}


def materialize(value):
    """Validated TypedDict data with lazy `Iterable` fields consumed (which validates them)."""
    if isinstance(value, dict):
        return {key: materialize(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [materialize(item) for item in value]
    if isinstance(value, Iterator):
        return [materialize(item) for item in value]
    return value


def difference(sent, kept, path="$"):
    """The first place where `kept` (what the type admitted) differs from `sent`."""
    if isinstance(sent, dict) and isinstance(kept, dict):
        for key in sent:
            if key not in kept:
                return f"{path}.{key}: not a field of the type"
            found = difference(sent[key], kept[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(sent, list) and isinstance(kept, list):
        if len(sent) != len(kept):
            return f"{path}: {len(sent)} items sent, {len(kept)} kept"
        for index, (a, b) in enumerate(zip(sent, kept)):
            found = difference(a, b, f"{path}[{index}]")
            if found:
                return found
        return None
    if sent != kept:
        return f"{path}: {sent!r} became {kept!r}"
    return None


def check_gemini_request(body):
    unknown = set(body) - {"contents", "tools", "systemInstruction"}
    if unknown:
        raise ValueError(f"unknown request fields {sorted(unknown)}")
    for content in body.get("contents", []):
        gemini_types.Content.model_validate(content)
    for tool in body.get("tools", []):
        gemini_types.Tool.model_validate(tool)
    if "systemInstruction" in body:
        gemini_types.Content.model_validate(body["systemInstruction"])


def check(record):
    provider, kind, body = record["provider"], record["kind"], record["body"]
    if kind == "request":
        if provider == "gemini":
            check_gemini_request(body)
            return
        kept = materialize(REQUESTS[provider].validate_python(body))
        found = difference(body, kept)
        if found:
            raise ValueError(found)
    elif kind == "response":
        RESPONSES[provider].validate_python(body)
    elif kind == "chunk":
        CHUNKS[provider].validate_python(body)
    else:
        raise ValueError(f"unknown kind {kind!r}")


def main():
    counts, failures = {}, 0
    for line in sys.stdin:
        if not line.strip():
            continue
        record = json.loads(line)
        key = (record["provider"], record["kind"])
        counts[key] = counts.get(key, 0) + 1
        try:
            check(record)
        except Exception as error:  # noqa: BLE001 - every failure is reported, then counted
            failures += 1
            if failures <= 50:
                text = str(error).replace("\n", " | ")[:600]
                print(f"FAIL {record['provider']} {record['kind']} {record['label']}: {text}")
    for (provider, kind), count in sorted(counts.items()):
        print(f"checked {provider} {kind}: {count}")
    print(f"failures: {failures}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
