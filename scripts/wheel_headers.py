#!/usr/bin/env python3
"""Unpacks one folder of a pinned PyPI wheel (a header-only library's include/) into a build-dependency folder.

Usage: wheel_headers.py URL SHA256 MEMBER_PREFIX DEST
Downloads URL (files.pythonhosted.org), refuses it unless its sha256 is SHA256, and writes the wheel's members under
MEMBER_PREFIX to DEST (the prefix taken off). Invariant: DEST appears whole or not at all (unpacked beside it, then
renamed), so an existing DEST is complete and nothing is done.
"""
import hashlib
import os
import shutil
import sys
import tempfile
import urllib.request
import zipfile


def main(url: str, sha256: str, prefix: str, dest: str) -> int:
    if os.path.isdir(dest):
        return 0
    parent = os.path.dirname(os.path.abspath(dest))
    os.makedirs(parent, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=parent) as tmp:
        wheel = os.path.join(tmp, "wheel.zip")
        with urllib.request.urlopen(url, timeout=120) as response, open(wheel, "wb") as out:
            shutil.copyfileobj(response, out)
        with open(wheel, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        if digest != sha256:
            print(f"wheel_headers: {url} has sha256 {digest}, not the pinned {sha256}", file=sys.stderr)
            return 1
        staged = os.path.join(tmp, "include")
        count = 0
        with zipfile.ZipFile(wheel) as z:
            for member in z.infolist():
                if member.is_dir() or not member.filename.startswith(prefix):
                    continue
                relative = member.filename[len(prefix):]
                if relative.startswith("/") or ".." in relative.split("/"):
                    print(f"wheel_headers: {url} holds a member outside its folder: {member.filename}", file=sys.stderr)
                    return 1
                target = os.path.join(staged, relative)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with z.open(member) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
                count += 1
        if count == 0:
            print(f"wheel_headers: {url} has no member under {prefix}", file=sys.stderr)
            return 1
        os.replace(staged, dest)
    print(f"wheel_headers: {count} files in {dest}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        print("usage: wheel_headers.py URL SHA256 MEMBER_PREFIX DEST", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
