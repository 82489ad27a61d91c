"""Run every `dlsched` command line shown in README.md and docs/*.md, as written, from a fresh copy.

A documented command that fails is a bug of the docs or of the code. This takes each command line
that starts with ``dlsched`` (or ``.venv/bin/dlsched``) in a fenced code block, joins its ``\\``
continuations, drops its trailing comment and its ``[optional]`` parts (synopsis brackets), and
runs it with bash from a copy of the repository's files (tracked and untracked, not ignored) whose
``../shared`` is this checkout's, so nothing a test or an earlier run left behind helps it. The
docs' ``P=../shared/traces/philly`` / ``REF=$P/reference_run`` are set as the README says.

Lines that cannot run as written are skipped with the reason, never silently: placeholders the
reader fills in (``LOG``, ``DIR``, ``HOST``, ``...``), files the reader brings (``my_profiles.csv``),
and services that run until stopped (``serve``, ``agent`` without ``--print-reading``).

    python scripts/check_doc_examples.py                 # all of them (slow: minutes to an hour)
    python scripts/check_doc_examples.py --cheap         # the ones that take seconds
    python scripts/check_doc_examples.py --list          # what would run or be skipped, and why
    python scripts/check_doc_examples.py --match reproduce --timeout 600

Exit code 0 when every command that ran succeeded, 1 when one failed or ran out of time, 2 on bad
options.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/*.md")
#: the variables the README defines in prose ("Below, P=... and REF=$P/reference_run")
VARIABLES = {"P": "../shared/traces/philly", "REF": "../shared/traces/philly/reference_run"}
#: a word the reader replaces (LOG, DIR, HOST, K, SECRET as a value is real, so it is not listed)
PLACEHOLDER = re.compile(r"(?<![\w$.-])(LOG|DIR|HOST|K|FILE|NAME|N)(?![\w-])")
#: files a doc example names as the reader's own, not shipped
READERS_FILES = ("my_profiles.csv", "resnet50.onnx", "bert.onnx", "observed.csv --predictor", "/data/",
                 "bad.onnx")
#: (first words, why) of commands that run until stopped or need a cluster
SERVICES = ((("serve",), "a service that runs until stopped and needs a Kubernetes API server"),
            (("agent", "--print-reading"), "reads the GPUs through NVML: needs an NVIDIA GPU and the 'agent' extra"),
            (("agent",), "a node agent that posts readings until stopped"))
#: commands that take seconds: the fast test runs these (first words of the command after `dlsched`)
CHEAP = (("policies",), ("topo", "show"), ("cluster", "show"), ("whatif",), ("replay",), ("reproduce", "--list"),
         ("reproduce", "topo-table1"), ("interference", "predict"),
         ("trace", "stats", "bad.csv"))
#: a line that documents a failure (its comment says the exit code): it must exit with that code
EXPECTS = re.compile(r"exit code (\d+)")


@dataclass
class Example:
    """One documented command: where it is, the line as written, and the command that is run."""

    doc: str
    line: int
    written: str
    command: str
    expect: int = 0
    skip: str = ""
    setup: str = ""     # the block's shell lines before it that write a file (``cat > F <<'EOF'``)

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    def words(self) -> list[str]:
        rest = re.sub(r"^(\.venv/bin/)?dlsched\s+", "", self.command)
        return rest.split()

    @property
    def cheap(self) -> bool:
        words = self.words()
        return not self.skip and any(tuple(words[:len(head)]) == head for head in CHEAP)


def _strip_comment(line: str) -> tuple[str, str]:
    """(code, comment) of a shell line: a ``#`` after whitespace and outside quotes starts the comment."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1:].strip()
    return line.rstrip(), ""


def _drop_optional(command: str) -> str:
    """The command without its synopsis brackets (``[--json]``, ``[--gpu A100]``): an option in
    brackets after a space; a jq filter's ``["key"]`` stays."""
    return re.sub(r"\s\[--[^\[\]]*\]", "", command)


def extract(doc: Path, root: Path = REPO) -> list[Example]:
    """Every ``dlsched`` command line in ``doc``'s fenced code blocks."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    examples: list[Example] = []
    fence = None
    setup: list[str] = []
    i = 0
    while i < len(lines):
        raw = lines[i]
        stripped = raw.strip()
        if stripped.startswith("```"):
            fence = None if fence is not None else stripped[3:].strip()
            setup = []
            i += 1
            continue
        text = stripped[2:] if stripped.startswith("$ ") else stripped
        heredoc = re.match(r"(mkdir -p \S+ && )?cat > \S+ <<'?(\w+)'?$", text) if fence is not None else None
        if heredoc is not None:   # a file the block writes for the commands after it
            end = next((k for k in range(i + 1, len(lines)) if lines[k].strip() == heredoc.group(2)), len(lines) - 1)
            setup.extend(lines[i:end + 1])
            i = end + 1
            continue
        if fence is None or fence in ("python", "toml", "yaml", "json", "mermaid") \
                or not re.match(r"(\.venv/bin/)?dlsched\s", text):
            i += 1
            continue
        start = i + 1
        parts = []
        comments = []
        while True:
            code, comment = _strip_comment(text)
            comments.append(comment)
            if code.endswith("\\") and i + 1 < len(lines):
                parts.append(code[:-1].strip())
                i += 1
                text = lines[i].strip()
                continue
            parts.append(code.strip())
            break
        written = " ".join(parts)
        command = _drop_optional(written)
        expect = EXPECTS.search(" ".join(comments))
        example = Example(str(doc.relative_to(root)), start, written, command, int(expect.group(1)) if expect else 0,
                          setup="\n".join(setup))
        example.skip = skip_reason(example)
        examples.append(example)
        i += 1
    return examples


def skip_reason(example: Example) -> str:
    """Why ``example`` cannot run as written, or ''."""
    command = example.command
    words = example.words()
    for head, why in SERVICES:
        if tuple(words[:len(head)]) == head:
            return why
    if " ... " in f" {command} " or command.endswith("..."):
        return "elided (`...`): the reader completes it"
    if (m := PLACEHOLDER.search(command)) is not None:
        return f"placeholder {m.group(1)}: the reader fills it in"
    for name in READERS_FILES:
        if name in command and not (example.expect and name.startswith("bad")):
            return f"names the reader's own file ({name.split()[0]})"
    return ""


def all_examples(root: Path = REPO) -> list[Example]:
    docs = [root / DOCS[0], *sorted((root / "docs").glob("*.md"))]
    return [ex for doc in docs for ex in extract(doc, root)]


def fresh_copy(root: Path, into: Path) -> Path:
    """The repository's tracked and untracked (not ignored) files under ``into/repo``, and
    ``into/shared`` pointing at this checkout's ``../shared``: a clone as a newcomer has it."""
    files = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard", "-z"],
                           capture_output=True, check=True).stdout.decode().split("\0")
    repo = into / "repo"
    for name in filter(None, files):
        src = root / name
        if not src.is_file():   # a deleted but still tracked file
            continue
        dst = repo / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    shared = (root / ".." / "shared").resolve()
    if shared.exists():
        (into / "shared").symlink_to(shared, target_is_directory=True)
    return repo


def run(example: Example, repo: Path, timeout: float) -> tuple[str, float, str]:
    """(outcome, seconds, last output line) of running ``example`` in ``repo``: 'ok', 'failed' or 'timeout'."""
    bindir = Path(sys.executable).parent
    env = {**os.environ, **VARIABLES, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(repo / "src"), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           "COLUMNS": "80", "NO_COLOR": "1"}
    env.pop("DLSCHED_SHARED", None)
    t0 = time.perf_counter()
    try:
        script = f"{example.setup}\n{example.command}" if example.setup else example.command
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", script], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=timeout, start_new_session=True)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return "timeout", time.perf_counter() - t0, _last_line(out)
    seconds = time.perf_counter() - t0
    text = proc.stderr.strip() or proc.stdout.strip()
    if proc.returncode == example.expect and (example.expect == 0 or "Traceback" not in proc.stderr):
        return "ok", seconds, ""
    error = next((ln for ln in text.splitlines() if ln.startswith("error:")), _last_line(text))
    return "failed", seconds, f"exit {proc.returncode} (expected {example.expect}): {error}"


def _last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cheap", action="store_true", help="only the commands that take seconds")
    parser.add_argument("--expensive", action="store_true", help="only the others")
    parser.add_argument("--match", default="", help="only commands containing this text")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per command (default 900)")
    parser.add_argument("--list", action="store_true", help="list the commands and skips, run nothing")
    args = parser.parse_args(argv)
    if not args.timeout > 0:
        print(f"error: --timeout {args.timeout}: give a positive number of seconds", file=sys.stderr)
        return 2
    examples = [ex for ex in all_examples() if args.match in ex.command
                and (not args.cheap or ex.cheap) and (not args.expensive or not ex.cheap)]
    if not examples:
        print("error: no documented command matches the selection", file=sys.stderr)
        return 2
    if args.list:
        for ex in examples:
            print(f"{ex.where}: {'skip (' + ex.skip + ')' if ex.skip else 'cheap' if ex.cheap else 'run'}: "
                  f"{ex.command}")
        return 0
    failed = 0
    seen: dict[tuple[str, str], str] = {}   # a command shown in several places runs once
    with tempfile.TemporaryDirectory(prefix="dlsched-doc-examples-") as tmp:
        repo = fresh_copy(REPO, Path(tmp))
        for ex in examples:
            if ex.skip:
                print(f"skip     {ex.where}: {ex.command}  ({ex.skip})", flush=True)
                continue
            key = (ex.setup, ex.command)
            if key in seen:
                print(f"same     {ex.where}: {ex.command}  (as {seen[key]})", flush=True)
                continue
            seen[key] = ex.where
            outcome, seconds, why = run(ex, repo, args.timeout)
            failed += outcome != "ok"
            print(f"{outcome:<8} {ex.where}: {ex.command}  ({seconds:.1f} s){'  ' + why if why else ''}", flush=True)
    ran = sum(1 for ex in examples if not ex.skip)
    print(f"{len(seen) - failed} of {len(seen)} documented commands ran as written ({ran - len(seen)} shown twice); "
          f"{failed} failed or timed out; {len(examples) - ran} skipped (reason beside each)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
