#!/usr/bin/python3
"""Writes a man page from the project's own docs, so the two cannot drift (meson runs it at build
time; see tools/man/meson.build).

usage: gen-man.py PAGE OUT SOURCE_DIR [HELP_CMD...]
PAGE is svcgate.8, svcgatectl.8 or svcgate.yaml.5. Sections of README.md / config/README.md are
taken whole by their heading; HELP_CMD, when given, is run and its output is the page's OPTIONS.
"""
import re
import subprocess
import sys

page, out, src = sys.argv[1], sys.argv[2], sys.argv[3]
help_cmd = sys.argv[4:]


def sections(path):
    """{heading: body} for the '## ' sections of a markdown file, and the text before the first."""
    text = open(path).read()
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    intro = re.sub(r"^# .*\n", "", parts[0]).strip()
    return intro, {parts[i].strip(): parts[i + 1].strip("\n") for i in range(1, len(parts), 2)}


def down(body):
    """Headings inside a section one level up (a man page has one level of sections below NAME)."""
    return re.sub(r"^### ", "## ", body, flags=re.M)


readme_intro, readme = sections(f"{src}/README.md")
conf_intro, conf = sections(f"{src}/config/README.md")
version = re.search(r"version\s*:\s*'([^']+)'", open(f"{src}/meson.build").read()).group(1)

PAGES = {
    "svcgate.8": ("SVCGATE", "8", "svcgate - a DPDK Kubernetes Service gateway",
                  [("DESCRIPTION", readme_intro), ("RUNNING", readme["Running svcgate"]),
                   ("UNDER SYSTEMD", readme["Under systemd"]), ("IPV6 AND DUAL-STACK", readme["IPv6 and dual-stack"]),
                   ("RELIABILITY", readme["Reliability"])],
                  "svcgatectl(8), svcgate.yaml(5)"),
    "svcgatectl.8": ("SVCGATECTL", "8", "svcgatectl - control and trace a svcgate gateway",
                     [("DESCRIPTION", readme["Running svcgate"])],
                     "svcgate(8), svcgate.yaml(5)"),
    "svcgate.yaml.5": ("SVCGATE.YAML", "5", "svcgate.yaml - svcgate's configuration",
                       [("DESCRIPTION", conf_intro)] + [(h.upper(), b) for h, b in conf.items()],
                       "svcgate(8), svcgatectl(8)"),
}
title, section, name, parts, see_also = PAGES[page]
md = [f"% {title}({section}) svcgate {version} | svcgate manual", "", "# NAME", "", name.replace(" - ", " \\- "), ""]
if help_cmd:
    h = subprocess.run(help_cmd, capture_output=True, text=True, timeout=30)
    md += ["# SYNOPSIS AND OPTIONS", "", "```", (h.stdout + h.stderr).strip(), "```", ""]
for head, body in parts:
    md += [f"# {head}", "", down(body), ""]
md += ["# SEE ALSO", "", see_also, ""]
r = subprocess.run(["pandoc", "-s", "-f", "markdown-smart", "-t", "man", "-o", out], input="\n".join(md), text=True)
sys.exit(r.returncode)
