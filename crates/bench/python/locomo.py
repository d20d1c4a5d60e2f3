"""The turns of a LoCoMo conversation, read as the Rust benchmarks read them."""


def turns(sample):
    """(speaker, text) of every turn of `sample`, sessions in order; a shared photo's caption
    is appended to the text as ` [shares a photo: …]`."""
    conv = sample.get("conversation")
    if not isinstance(conv, dict):
        return []
    sessions = []
    for k, v in conv.items():
        n = k.removeprefix("session_")
        if n != k and n.isdigit() and isinstance(v, list):
            sessions.append((int(n), v))
    out = []
    for _, session in sorted(sessions, key=lambda s: s[0]):
        for t in session:
            text = t.get("text") if isinstance(t.get("text"), str) else ""
            if isinstance(t.get("blip_caption"), str):
                text += f" [shares a photo: {t['blip_caption']}]"
            out.append((t.get("speaker"), text))
    return out
