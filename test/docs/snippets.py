"""The code blocks of the project's Markdown files, for tests that run them
verbatim (no second copy of a snippet is kept anywhere).

Every fenced block that has a language tag, or whose lines start with "$ "
(a transcript), must be named by an HTML comment on the line before its
fence:

    <!-- snippet: NAME -->          the tests run it (test/docs/*.test)
    <!-- snippet-skip: REASON -->   not run, for the reason given

Commands:
  snippets.py check FILE...             every block is marked; names unique
  snippets.py extract FILE NAME [-o OUT] the block's text
  snippets.py run FILE NAME --root DIR  runs a sh block with bash -e in DIR
                                        (DIR holds the links build/ and test/),
                                        a python block with this interpreter
                                        in DIR (PYTHONPATH=DIR/build/python),
                                        an mlir block through DIR/build/bin/
                                        moe-opt (it must verify),
                                        or a transcript: each "$ CMD" line
                                        runs in DIR and its stdout+stderr
                                        must equal the lines that follow
                                        (a line ending in " ..." matches any
                                        line starting with the text before
                                        it)
  snippets.py names FILE                the snippet names of FILE
  snippets.py ir-examples FILE... --moe-opt PATH
                                        every ```mlir block of FILE (the
                                        reference docs generated from ODS,
                                        whose blocks are unnamed fragments)
                                        is wrapped and must verify: an op
                                        fragment becomes the body of a
                                        func.func whose arguments are the
                                        values it uses without defining
                                        them, typed by the op's functional
                                        type; a fragment that starts with
                                        "%name:" is an argument list; a line
                                        <!-- ir-prelude: IR --> before the
                                        fence adds IR at module level (a
                                        shard.grid the example names)
"""
import argparse
import os
import re
import subprocess
import sys

MARK = re.compile(r"^<!--\s*snippet(-skip)?:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(`{3,})(\S*)\s*$")


def blocks(path):
    """(name or None, skip reason or None, lang, first line number, lines)."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(1), m.group(2)
        start = i
        body = []
        i += 1
        while i < len(lines) and lines[i].rstrip() != fence:
            body.append(lines[i])
            i += 1
        i += 1
        prev = start - 1
        while prev >= 0 and not lines[prev].strip():
            prev -= 1
        name = skip = None
        if prev >= 0:
            mark = MARK.match(lines[prev].strip())
            if mark:
                if mark.group(1):
                    skip = mark.group(2) or "?"
                else:
                    name = mark.group(2)
        out.append((name, skip, lang, start + 1, body))
    return out


def is_transcript(body):
    return any(l.startswith("$ ") for l in body)


def needs_mark(lang, body):
    return bool(lang) or is_transcript(body)


def check(paths):
    bad = 0
    for path in paths:
        seen = {}
        for name, skip, lang, line, body in blocks(path):
            if not needs_mark(lang, body):
                continue
            if name is None and skip is None:
                print(f"{path}:{line}: a ```{lang} block without <!-- snippet: NAME --> or <!-- snippet-skip: REASON -->")
                bad += 1
            if name is not None:
                if name in seen:
                    print(f"{path}:{line}: snippet '{name}' also at line {seen[name]}")
                    bad += 1
                seen[name] = line
    if bad:
        sys.exit(1)
    print(f"snippets: {len(paths)} file(s), every code block marked")


def find(path, name):
    for n, _, lang, line, body in blocks(path):
        if n == name:
            return lang, line, body
    sys.exit(f"snippets: {path} has no snippet '{name}'")


def run(path, name, root):
    lang, line, body = find(path, name)
    if lang == "mlir":
        # IR: must parse and verify (moe-opt of the tree under DIR).
        result = subprocess.run([os.path.join(root, "build", "bin", "moe-opt"), "-"],
                                input="\n".join(body) + "\n", text=True, cwd=root)
        if result.returncode:
            sys.exit(f"snippets: {path}:{line} '{name}' does not verify")
        return
    if lang in ("c", "cpp", "cmake"):
        sys.exit(f"snippets: {path}:{line} '{name}' is {lang}: extract it and build it")
    if lang == "python":
        # Python: run by this interpreter in DIR with the build tree's
        # package importable (PYTHONPATH=build/python, as docs/python.md says).
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [os.path.join(root, "build", "python")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        result = subprocess.run([sys.executable, "-"], input="\n".join(body) + "\n",
                                text=True, cwd=root, env=env)
        if result.returncode:
            sys.exit(f"snippets: {path}:{line} '{name}' failed with exit code {result.returncode}")
        return
    if not is_transcript(body):
        script = "\n".join(body) + "\n"
        result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script],
                                cwd=root)
        if result.returncode:
            sys.exit(f"snippets: {path}:{line} '{name}' failed with exit code {result.returncode}")
        return
    # A transcript: "$ CMD" lines and the output each must print.
    steps = []
    for l in body:
        if l.startswith("$ "):
            steps.append([l[2:], []])
        elif steps and l.startswith("    ") and not steps[-1][1] and steps[-1][0].endswith("\\"):
            steps[-1][0] += "\n" + l
        elif steps:
            steps[-1][1].append(l)
    for cmd, expected in steps:
        while expected and not expected[-1].strip():
            expected.pop()
        result = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=root,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        got = result.stdout.rstrip("\n").split("\n") if result.stdout.strip() else []
        ok = len(got) == len(expected) and all(
            g == e or (e.endswith(" ...") and g.startswith(e[:-4]))
            for g, e in zip(got, expected))
        if not ok:
            print(f"snippets: {path}:{line} '{name}': the output of\n  $ {cmd}\ndiffers from the document.")
            print("documented:")
            print("\n".join("  | " + e for e in expected))
            print("actual:")
            print("\n".join("  | " + g for g in got))
            sys.exit(1)


PRELUDE = re.compile(r"^<!--\s*ir-prelude:\s*(.*?)\s*-->\s*$")
SSA_DEF = re.compile(r"^\s*((?:%[\w.$-]+(?:#\d+)?\s*,\s*)*%[\w.$-]+(?:#\d+)?)\s*=")
SSA_USE = re.compile(r"%[\w.$-]+")


def split_types(text):
    """Splits a comma-separated type list at bracket depth 0."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def operand_types(text):
    """The operand types of the first functional type `: (T, ...) ->`."""
    m = re.search(r":\s*\(", text)
    if not m:
        return None
    i, depth, start = m.end(), 1, m.end()
    while i < len(text) and depth:
        if text[i] in "<([{":
            depth += 1
        elif text[i] in ">)]}":
            depth -= 1
        i += 1
    return split_types(text[start:i - 1])


def wrap_ir(body, preludes):
    """A module in which the fragment `body` must verify, or an error."""
    text = "\n".join(body)
    first = next((l for l in body if l.strip()), "")
    if re.match(r"^\s*%[\w.$-]+\s*:", first):
        return "\n".join(preludes + [f"func.func @example({text}) {{", "  return", "}"]), None
    defined, uses = set(), []
    for l in body:
        m = SSA_DEF.match(l)
        rest = l
        if m:
            defined.update(v.split("#")[0] for v in re.findall(r"%[\w.$-]+", m.group(1)))
            rest = l[m.end():]
        for v in SSA_USE.findall(rest):
            if v not in defined and v not in uses:
                uses.append(v)
    types = operand_types(text) if uses else []
    if types is None or len(types) != len(uses):
        return None, (f"cannot wrap: it uses {len(uses)} undefined value(s) "
                      f"{' '.join(uses)} but its functional type lists "
                      f"{'none' if types is None else len(types)}")
    args = ", ".join(f"{v}: {t}" for v, t in zip(uses, types))
    return "\n".join(preludes + [f"func.func @example({args}) {{", text, "  return", "}"]), None


def ir_examples(paths, moe_opt):
    """Every ```mlir block of the files verifies once wrapped (wrap_ir)."""
    count, bad = 0, 0
    for path in paths:
        lines = open(path, encoding="utf-8").read().split("\n")
        for _, _, lang, line, body in blocks(path):
            if lang != "mlir":
                continue
            preludes, prev = [], line - 2
            while prev >= 0 and (not lines[prev].strip() or PRELUDE.match(lines[prev].strip())):
                m = PRELUDE.match(lines[prev].strip())
                if m:
                    preludes.insert(0, m.group(1))
                prev -= 1
            module, error = wrap_ir(body, preludes)
            count += 1
            if error:
                print(f"{path}:{line}: {error}")
                bad += 1
                continue
            result = subprocess.run([moe_opt, "-"], input=module + "\n", text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if result.returncode:
                print(f"{path}:{line}: the example does not verify:")
                print("\n".join("  | " + l for l in result.stdout.rstrip().split("\n")))
                bad += 1
    if bad:
        sys.exit(1)
    print(f"ir-examples: {count} example(s) verified")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("files", nargs="+")
    e = sub.add_parser("extract")
    e.add_argument("file")
    e.add_argument("name")
    e.add_argument("-o", dest="out")
    r = sub.add_parser("run")
    r.add_argument("file")
    r.add_argument("name")
    r.add_argument("--root", required=True)
    n = sub.add_parser("names")
    n.add_argument("file")
    x = sub.add_parser("ir-examples")
    x.add_argument("files", nargs="+")
    x.add_argument("--moe-opt", required=True)
    a = p.parse_args()
    if a.cmd == "check":
        check(a.files)
    elif a.cmd == "extract":
        _, _, body = find(a.file, a.name)
        text = "\n".join(body) + "\n"
        if a.out:
            os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
            # Rewrite only on change, so that builds depending on it stay put.
            if not os.path.exists(a.out) or open(a.out).read() != text:
                open(a.out, "w").write(text)
        else:
            sys.stdout.write(text)
    elif a.cmd == "run":
        run(a.file, a.name, a.root)
    elif a.cmd == "ir-examples":
        ir_examples(a.files, a.moe_opt)
    else:
        for name, _, _, _, _ in blocks(a.file):
            if name:
                print(name)


if __name__ == "__main__":
    main()
