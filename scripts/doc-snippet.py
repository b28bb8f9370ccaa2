#!/usr/bin/env python3
"""Prints a code block of a Markdown document, verbatim, so that tests run
the examples of the docs themselves (no second copy of a snippet).

Usage: doc-snippet.py DOC.md NAME

The block is the first fenced block (```lang ... ```) after the line
`<!-- snippet: NAME -->`. Exits 1 with one error line when the marker or
the block is missing, or the marker appears twice.
"""
import sys


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: doc-snippet.py DOC.md NAME\n")
        return 1
    path, name = argv[1], argv[2]
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    marker = "<!-- snippet: %s -->" % name
    starts = [i for i, line in enumerate(lines) if line.strip() == marker]
    if len(starts) != 1:
        sys.stderr.write("doc-snippet: %s: %s marker '%s'\n" %
                         (path, "no" if not starts else "more than one", marker))
        return 1
    i = starts[0] + 1
    while i < len(lines) and not lines[i].startswith("```"):
        if lines[i].strip():
            sys.stderr.write("doc-snippet: %s:%d: text between '%s' and its code block\n" %
                             (path, i + 1, marker))
            return 1
        i += 1
    if i == len(lines):
        sys.stderr.write("doc-snippet: %s: no code block after '%s'\n" % (path, marker))
        return 1
    end = i + 1
    while end < len(lines) and lines[end].rstrip() != "```":
        end += 1
    if end == len(lines):
        sys.stderr.write("doc-snippet: %s: the code block of '%s' is not closed\n" %
                         (path, marker))
        return 1
    sys.stdout.write("\n".join(lines[i + 1:end]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
