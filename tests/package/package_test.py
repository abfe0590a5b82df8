#!/usr/bin/python3
"""The Debian package: built from a clean checkout (tools/package), lintian without errors, its
layout once extracted into a scratch root (dpkg -x), and its systemd units accepted by
systemd-analyze verify (in a private mount namespace where the package's /usr lies over the
host's, so nothing is installed on the machine).

usage: package_test.py SOURCE_DIR"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import checks  # noqa: E402
from checks import check  # noqa: E402

src = sys.argv[1]
with tempfile.TemporaryDirectory(prefix="svcgate-pkgtest-") as d:
    # noopt: -O0 and a unity build (debian/rules), and -g0 appended to dpkg-buildflags' -g: what is checked here is
    # the packaging, and this compile, beside the lab's tests, is the longest test of tools/test
    # (tools/package alone, here: 198 s with -g, 156 s with -g0). tools/package builds the release.
    # gzip -1 instead of dpkg-deb's xz -6: the archive's compressor is dpkg-deb's, not the packaging's,
    # and xz took 17.9 s of CPU in a fresh tools/test run (process accounting).
    env = dict(os.environ, DEB_BUILD_OPTIONS="noopt", DEB_CXXFLAGS_APPEND="-g0", DEB_CFLAGS_APPEND="-g0",
               DPKG_DEB_COMPRESSOR_TYPE="gzip", DPKG_DEB_COMPRESSOR_LEVEL="1")
    r = subprocess.run([os.path.join(src, "tools", "package"), d], capture_output=True, text=True, timeout=900,
                       env=env)
    debs = [x for x in glob.glob(os.path.join(d, "svcgate_*_amd64.deb"))]
    check(r.returncode == 0 and len(debs) == 1, f"tools/package builds svcgate_VERSION_amd64.deb ({r.stdout.strip()[-200:]} {r.stderr.strip()[-300:]})")
    if not debs:
        checks.finish("the Debian package")
    deb = debs[0]
    lint = subprocess.run(["lintian", "--no-tag-display-limit", deb], capture_output=True, text=True, timeout=300)
    errors = [l for l in lint.stdout.splitlines() if l.startswith("E:")]
    check(not errors, f"lintian: no error ({errors or lint.stdout.strip().splitlines()})")
    check(not any("no-manual-page" in l for l in lint.stdout.splitlines()), "lintian: every program has its man page")
    info = subprocess.run(["dpkg-deb", "-f", deb, "Depends"], capture_output=True, text=True).stdout
    check("librte-eal" in info and "libsystemd0" in info and "libyaml-cpp" in info,
          f"Depends come from the shared libraries it links ({info.strip()[:120]}...)")
    root = os.path.join(d, "root")
    subprocess.run(["dpkg", "-x", deb, root], check=True)
    for path in ("usr/bin/svcgate", "usr/bin/svcgatectl", "lib/systemd/system/svcgate.service",
                 "lib/systemd/system/svcgate@.service", "etc/svcgate/examples/lab.yaml",
                 "etc/svcgate/examples/kubernetes.yaml", "etc/svcgate/examples/bird-gateway.conf",
                 "usr/share/doc/svcgate/README.md.gz",
                 "usr/share/doc/svcgate/copyright", "usr/share/man/man8/svcgate.8.gz",
                 "usr/share/man/man8/svcgatectl.8.gz", "usr/share/man/man5/svcgate.yaml.5.gz",
                 "usr/share/bash-completion/completions/svcgatectl", "usr/share/bash-completion/completions/svcgate"):
        check(os.path.exists(os.path.join(root, path)), f"the package installs /{path}")
    # Completion: the packaged file, as bash would call it for "svcgatectl tr<TAB>" and
    # "svcgate --log-level w<TAB>".
    comp = os.path.join(root, "usr/share/bash-completion/completions/svcgatectl")
    script = (f"source {comp}; COMP_WORDS=(svcgatectl tr); COMP_CWORD=1; _svcgatectl; echo \"${{COMPREPLY[*]}}\"; "
              "COMP_WORDS=(svcgate --log-level w); COMP_CWORD=2; _svcgate; echo \"${COMPREPLY[*]}\"")
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    check(r.stdout.splitlines() == ["trace", "warning"], f"bash completion completes commands and levels ({r.stdout.splitlines()} {r.stderr.strip()})")
    r = subprocess.run([os.path.join(root, "usr/bin/svcgate"), "--config", os.path.join(root, "etc/svcgate/examples/lab.yaml"),
                        "--check"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and "OK" in r.stdout, f"the packaged svcgate checks the packaged example ({r.stdout.strip()} {r.stderr.strip()[-200:]})")
    # systemd-analyze verify checks that every Exec*= command exists: the package's /usr over the
    # host's, in a mount namespace of this test's own.
    inst = os.path.join(d, "svcgate@gw1.service")
    shutil.copy(os.path.join(root, "lib/systemd/system/svcgate@.service"), inst)
    script = (f"mount -t overlay overlay -o lowerdir={root}/usr:/usr /usr && "
              f"systemd-analyze verify {root}/lib/systemd/system/svcgate.service {inst}")
    r = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and not r.stderr.strip(), f"systemd-analyze verify accepts svcgate.service and svcgate@.service ({r.stderr.strip()})")
checks.finish("the Debian package")
