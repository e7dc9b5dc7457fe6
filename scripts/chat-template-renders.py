#!/usr/bin/env python3
"""Renders the chat templates of crates/kiln-model/tests/data/chat_templates/ with Hugging Face
transformers (the renderer the templates are written for) and writes expected.json there, which
kiln-model's `chat_templates` test compares kiln's renders against. Run it in an environment with
`pip install transformers jinja2`; the test itself needs no Python."""

import json
import pathlib
import sys

from transformers.utils.chat_template_utils import render_jinja_template

DIR = pathlib.Path(__file__).resolve().parent.parent / "crates/kiln-model/tests/data/chat_templates"


def main() -> None:
    cases = json.loads((DIR / "cases.json").read_text())
    expected = {}
    for tname, t in cases["templates"].items():
        source = (DIR / t["file"]).read_text()
        for cname, conv in cases["conversations"].items():
            for gen in (True, False):
                key = f"{tname}/{cname}/{'prompt' if gen else 'no-prompt'}"
                try:
                    rendered, _ = render_jinja_template(
                        conversations=[conv["messages"]],
                        tools=cases["tools"] if conv.get("tools") else None,
                        chat_template=source,
                        add_generation_prompt=gen,
                        bos_token=t["bos_token"],
                        eos_token=t["eos_token"],
                        **cases["kwargs"],
                    )
                    expected[key] = {"text": rendered[0]}
                except Exception as e:  # the template refused the conversation
                    expected[key] = {"error": f"{type(e).__name__}: {e}"}
    out = DIR / "expected.json"
    out.write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {len(expected)} renders to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
