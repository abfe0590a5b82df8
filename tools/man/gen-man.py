#!/usr/bin/python3
"""Writes a man page from the project's own docs, so the two cannot drift (meson runs it at build
time; see tools/man/meson.build).

usage: gen-man.py PAGE OUT SOURCE_DIR [HELP_CMD...]
PAGE is svcgate.8, svcgatectl.8 or svcgate.yaml.5. Sections of README.md, docs/*.md and
config/README.md are taken whole by their '## ' heading; HELP_CMD, when given, is run and its
output is the page's SYNOPSIS AND OPTIONS.

A man page speaks of the installed system, not of the source tree: the repository paths the
sections name are rewritten by INSTALLED (an example config → where the package puts it, a
document → the man page and section that carry it, a build output → the program's name), the
tables' "tests" columns are left out, and a repository path left over fails the build with its
name, so a doc that names a new one gets its entry here.
"""
import re
import subprocess
import sys

page, out, src = sys.argv[1], sys.argv[2], sys.argv[3]
help_cmd = sys.argv[4:]


def sections(path):
    """(intro, {heading: body}) for the '## ' sections of a markdown file."""
    text = open(f"{src}/{path}", encoding="utf-8").read()
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    intro = re.sub(r"^# .*\n", "", parts[0]).strip()
    return intro, {parts[i].strip(): parts[i + 1].strip("\n") for i in range(1, len(parts), 2)}


_cache = {}


def take(path, heading=None):
    """A section's body; heading None: the text before the first section."""
    if path not in _cache:
        _cache[path] = sections(path)
    intro, secs = _cache[path]
    if heading is None:
        return intro
    if heading not in secs:
        sys.exit(f"gen-man: {path} has no section '## {heading}' (it has: {', '.join(secs)})")
    return secs[heading]


def first_paragraph(text):
    return text.split("\n\n")[0]


# Each page: title, section, NAME line, [(MAN SECTION, [(file, heading or None), ...])], SEE ALSO.
# A man section made of several doc sections gets each after the first as a subsection.
PAGES = {
    "svcgate.8": ("SVCGATE", "8", "svcgate - a DPDK Kubernetes Service gateway", [
        ("DESCRIPTION", [("README.md", "¶")]),
        ("RUNNING", [("docs/operations.md", "Running svcgate")]),
        ("ON A REAL NIC", [("README.md", "Running on a real NIC -code")]),
        ("WHAT THE GATEWAY DOES WITH A PACKET", [("docs/operations.md", "What the gateway does with a packet")]),
        ("METRICS AND TELEMETRY", [("docs/operations.md", "Metrics and telemetry")]),
        ("UNDER SYSTEMD", [("docs/operations.md", "Under systemd")]),
        ("LOGS", [("docs/operations.md", "Logs")]),
        ("RESTARTS AND UPGRADES", [("docs/operations.md", "Restarts and upgrades keep their connections")]),
        ("IPV6 AND DUAL-STACK", [("docs/ipv6.md", None), ("docs/ipv6.md", "How each part serves IPv6")]),
        ("SEVERAL GATEWAYS", [("docs/ha.md", None)] + [("docs/ha.md", h) for h in (
            "Host path", "Announcements", "Health", "Drain", "Keeping both directions of a flow on one gateway",
            "Flows shared between gateways (no connection lost)")]),
        ("THE CLIENT'S ADDRESS AT THE POD", [("docs/client-ip.md", None)] + [("docs/client-ip.md", h) for h in (
            "Turning it on", "What stays masqueraded", "The routing it needs", "When the way back is missing")]),
        ("THE CLUSTER'S LOAD BALANCER", [("docs/load-balancer.md", None)] + [("docs/load-balancer.md", h) for h in (
            "Turning it on", "Which Services, and what they get", "One writer among several gateways",
            "Restarts and pool edits never move an address", "What it writes and tells", "Permissions",
            "Moving from MetalLB")]),
        ("ACTIVE HEALTH CHECKS", [("docs/health-checks.md", None)] + [("docs/health-checks.md", h) for h in (
            "Turning it on", "What a failing endpoint gets", "Where the probes come from", "Seen and counted")]),
        ("FLOW LOGS", [("docs/flow-logs.md", None)] + [("docs/flow-logs.md", h) for h in (
            "Turning it on", "What is logged", "Never on the fast path's back", "Reading it with nfdump",
            "Top talkers")]),
        ("RELIABILITY", [("docs/guarantees.md", "Reliability")]),
        ("FILES", [("docs/operations.md", "Files")]),
    ], "svcgatectl(8), svcgate.yaml(5)"),
    "svcgatectl.8": ("SVCGATECTL", "8", "svcgatectl - control and trace a svcgate gateway", [
        ("DESCRIPTION", [("docs/operations.md", "svcgatectl -code")]),  # the synopsis is --help's
        ("TRACE", [("docs/trace.md", None)] + [("docs/trace.md", h) for h in (
            "Tracing packets", "How packets are written", "What it prints")]),
        ("DRAIN", [("docs/ha.md", "Drain")]),
        ("FILES", [("docs/operations.md", "Files")]),
    ], "svcgate(8), svcgate.yaml(5)"),
    "svcgate.yaml.5": ("SVCGATE.YAML", "5", "svcgate.yaml - svcgate's configuration",
                       [("DESCRIPTION", [("config/README.md", None)])]
                       + [(h.upper(), [("config/README.md", h)]) for h in sections("config/README.md")[1]]
                       + [("FILES", [("docs/operations.md", "Files")])],
                       "svcgate(8), svcgatectl(8)"),
}

# Where a document's text is on an installed system: (man page, section or None).
DOC_PAGES = {
    "config/README.md": ("svcgate.yaml.5", None),
    "docs/operations.md": ("svcgate.8", None),
    "docs/ipv6.md": ("svcgate.8", "IPV6 AND DUAL-STACK"),
    "docs/ha.md": ("svcgate.8", "SEVERAL GATEWAYS"),
    "docs/client-ip.md": ("svcgate.8", "THE CLIENT'S ADDRESS AT THE POD"),
    "docs/guarantees.md": ("svcgate.8", "RELIABILITY"),
    "docs/load-balancer.md": ("svcgate.8", "THE CLUSTER'S LOAD BALANCER"),
    "docs/health-checks.md": ("svcgate.8", "ACTIVE HEALTH CHECKS"),
    "docs/flow-logs.md": ("svcgate.8", "FLOW LOGS"),
    "docs/trace.md": ("svcgatectl.8", "TRACE"),
}
# Repository path → what an installed system has (debian/svcgate.install puts the examples in
# /etc/svcgate/examples/; the programs are on the PATH). "" drops the path and its parentheses.
INSTALLED = {
    "build/control/svcgatectl": "svcgatectl",
    "build/control/svcgate": "svcgate",
    "config/lab.yaml": "/etc/svcgate/examples/lab.yaml",
    "config/kubernetes.yaml": "/etc/svcgate/examples/kubernetes.yaml",
    "config/k8s-objects.yaml": "/etc/svcgate/examples/k8s-objects.yaml",
    "config/kube-api.yaml": "/etc/svcgate/examples/kube-api.yaml",
    "config/client-ip.yaml": "/etc/svcgate/examples/client-ip.yaml",
    "config/bird-gateway.conf": "/etc/svcgate/examples/bird-gateway.conf",
    "config/bird-router.conf": "/etc/svcgate/examples/bird-router.conf",
    "contrib/grafana/svcgate.json": "",
}
REPO_PATH = re.compile(r"(?<![\w/.-])(?:dataplane|control|config|bench|tests|tools|docs|debian|contrib|build[\w-]*|\.ci)/[\w./*-]*")


def doc_ref(path):
    """A document as this page names it: 'svcgate.yaml(5)', 'svcgate(8), section SEVERAL GATEWAYS',
    or 'section TRACE' for a section of this very page."""
    target, sec = DOC_PAGES[path]
    name, num = target.rsplit(".", 1)
    if target == page:
        return f"section {sec}" if sec else "this page"
    return f"{name}({num}), section {sec}" if sec else f"{name}({num})"


def installed(md):
    """The text with its repository paths replaced by what the installed system has."""
    table = {p: doc_ref(p) for p in DOC_PAGES} | INSTALLED
    for path in sorted(table, key=len, reverse=True):
        to, q = table[path], re.escape(path)
        if to == "":  # not installed: dropped where it is named in parentheses, else left to fail
            md = re.sub(r"\s*\(`" + q + r"`\)", "", md)
            continue
        # a file or program stays code; a man page reference is text
        md = re.sub(r"`" + q + r"`", f"`{to}`" if path in INSTALLED else to, md)
        md = re.sub(r"(?<![\w/.-])" + q + r"(?![\w/-])", to, md)  # in code blocks
    return md


def drop_column(md, name):
    """Pipe tables lose their column headed `name`; the others get widths by the square root of
    their text's length (pandoc sizes a table with long rows by its separator's dashes)."""
    def cells(row):
        return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]

    def table(rows):
        c = [cells(r) for r in rows]
        if name not in c[0]:
            return rows
        drop = c[0].index(name)
        for r in c:
            del r[drop]
        body = c[2:] or c[:1]
        weight = [(sum(len(r[i]) for r in body) / len(body)) ** 0.5 for i in range(len(c[0]))]
        c[1] = ["-" * max(3, round(40 * w / sum(weight))) for w in weight]
        return ["| " + " | ".join(r) + " |" for r in c]

    out, rows = [], []
    for line in md.split("\n") + [""]:
        if line.startswith("|"):
            rows.append(line)
            continue
        if rows:
            out += table(rows)
            rows = []
        out.append(line)
    return "\n".join(out[:-1])


def body(file, heading):
    """A section's text; "¶": the first paragraph of the intro; "HEADING -code": without the code
    blocks."""
    if heading == "¶":
        return first_paragraph(take(file))
    if heading and heading.endswith(" -code"):
        text = take(file, heading[:-len(" -code")])
        return re.sub(r"(?m)^(?:    .*\n?)+\n?", "", text).strip()
    return re.sub(r"^### ", "## ", take(file, heading), flags=re.M)  # one level below the sections


title, section, name, parts, see_also = PAGES[page]
version = re.search(r"version\s*:\s*'([^']+)'", open(f"{src}/meson.build").read()).group(1)
md = [f"% {title}({section}) svcgate {version} | svcgate manual", "", "# NAME", "", name.replace(" - ", " \\- "), ""]
if help_cmd:
    h = subprocess.run(help_cmd, capture_output=True, text=True, timeout=30)
    md += ["# SYNOPSIS AND OPTIONS", "", "```", (h.stdout + h.stderr).strip(), "```", ""]
for head, srcs in parts:
    md += [f"# {head}", ""]
    for i, (file, heading) in enumerate(srcs):
        if i > 0 and heading:
            md += [f"## {heading.removesuffix(' -code')}", ""]
        md += [body(file, heading), ""]
md += ["# SEE ALSO", "", see_also, ""]
text = drop_column(installed("\n".join(md)), "tests")

left = sorted(set(REPO_PATH.findall(text)))
if left:
    sys.exit(f"gen-man: {page} would name repository paths: {', '.join(left)} "
             "(give each an entry in INSTALLED or DOC_PAGES of tools/man/gen-man.py, or keep it out of the sections the page takes)")
r = subprocess.run(["pandoc", "-s", "-f", "markdown-smart", "-t", "man"], input=text, capture_output=True, text=True)
if r.returncode:
    sys.exit(f"gen-man: pandoc failed: {r.stderr.strip()}")
# A '|' in a table's code is written '\|' in markdown; pandoc 2.17 keeps the backslash.
open(out, "w", encoding="utf-8").write(r.stdout.replace("\\[rs]|", "|"))
