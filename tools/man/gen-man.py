#!/usr/bin/python3
"""Writes a man page from the project's own docs, so the two cannot drift (meson runs it at build
time; see tools/man/meson.build).

usage: gen-man.py PAGE OUT SOURCE_DIR [HELP_CMD...]
PAGE is svcgate.8, svcgatectl.8 or svcgate.yaml.5. Sections of README.md, docs/*.md and
config/README.md are taken whole by their '## ' heading; HELP_CMD, when given, is run and its
output is the page's SYNOPSIS AND OPTIONS.
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
        ("RELIABILITY", [("docs/guarantees.md", "Reliability")]),
    ], "svcgatectl(8), svcgate.yaml(5)"),
    "svcgatectl.8": ("SVCGATECTL", "8", "svcgatectl - control and trace a svcgate gateway", [
        ("DESCRIPTION", [("docs/operations.md", "svcgatectl -code")]),  # the synopsis is --help's
        ("TRACE", [("docs/trace.md", None)] + [("docs/trace.md", h) for h in (
            "Tracing packets", "How packets are written", "What it prints")]),
        ("DRAIN", [("docs/ha.md", "Drain")]),
    ], "svcgate(8), svcgate.yaml(5)"),
    "svcgate.yaml.5": ("SVCGATE.YAML", "5", "svcgate.yaml - svcgate's configuration",
                       [("DESCRIPTION", [("config/README.md", None)])]
                       + [(h.upper(), [("config/README.md", h)]) for h in sections("config/README.md")[1]],
                       "svcgate(8), svcgatectl(8)"),
}

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
text = "\n".join(md)
r = subprocess.run(["pandoc", "-s", "-f", "markdown-smart", "-t", "man"], input=text, capture_output=True, text=True)
if r.returncode:
    sys.exit(f"gen-man: pandoc failed: {r.stderr.strip()}")
open(out, "w", encoding="utf-8").write(r.stdout)
