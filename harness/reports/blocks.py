"""A report as a list of blocks, rendered to self-contained HTML or to Markdown with image files."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path

from harness.storage.atomic import write_text_atomic


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Para:
    text: str


@dataclass(frozen=True)
class Table:
    headers: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class Figure:
    name: str
    png: bytes
    caption: str


Block = Heading | Para | Table | Figure

CSS = """
body { font-family: system-ui, sans-serif; max-width: 960px; margin: 2em auto; color: #222; line-height: 1.45; }
h1 { border-bottom: 2px solid #444; padding-bottom: .2em; }
h2 { margin-top: 1.8em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .6em 0; }
td, th { border: 1px solid #ccc; padding: .25em .6em; text-align: left; }
th { background: #f3f3f3; }
figure { margin: 1em 0; } figcaption { color: #555; font-size: .9em; }
code { background: #f3f3f3; padding: 0 .2em; }
"""


def to_html(title: str, blocks: list[Block]) -> str:
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
           f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>"]
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"<h{block.level}>{html.escape(block.text)}</h{block.level}>")
        elif isinstance(block, Para):
            out.append(f"<p>{html.escape(block.text)}</p>")
        elif isinstance(block, Table):
            head = "".join(f"<th>{html.escape(h)}</th>" for h in block.headers)
            body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in block.rows)
            out.append(f"<table><tr>{head}</tr>{body}</table>")
        else:
            data = base64.b64encode(block.png).decode()
            out.append(f"<figure><img alt='{html.escape(block.caption)}' src='data:image/png;base64,{data}'>"
                       f"<figcaption>{html.escape(block.caption)}</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out)


def write_markdown(path: Path, title: str, blocks: list[Block]) -> None:
    """Markdown beside a `<stem>_files/` folder holding the figures. The figures are written into a
    `.partial` folder that is renamed into place only once the Markdown is written too, so a full disk
    leaves neither half a folder nor an old report pointing at new figures."""
    import shutil

    from harness.errors import HarnessInputError

    files = path.with_name(path.stem + "_files")
    partial = files.with_name(files.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    out = [f"# {title}", ""]
    try:
        partial.mkdir(parents=True)
        for block in blocks:
            if isinstance(block, Heading):
                out += ["#" * block.level + " " + block.text, ""]
            elif isinstance(block, Para):
                out += [block.text, ""]
            elif isinstance(block, Table):
                out.append("| " + " | ".join(block.headers) + " |")
                out.append("|" + "---|" * len(block.headers))
                out += ["| " + " | ".join(row) + " |" for row in block.rows]
                out.append("")
            else:
                figure = partial / f"{block.name}.png"
                try:
                    figure.write_bytes(block.png)
                except OSError as exc:
                    raise HarnessInputError(files / figure.name, None, f"cannot write: {exc.strerror or exc}; "
                                            "nothing was written") from None
                out += [f"![{block.caption}]({files.name}/{block.name}.png)", "", f"*{block.caption}*", ""]
        write_text_atomic(path, "\n".join(out))
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    shutil.rmtree(files, ignore_errors=True)
    partial.rename(files)
