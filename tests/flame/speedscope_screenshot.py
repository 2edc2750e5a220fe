#!/usr/bin/env python3
"""Check a speedscope file against the file-format-schema.json the npm package ships (jsonschema),
then load it in the speedscope app (the npm package's built app, from
$FLAME_TOOLS/node/node_modules/speedscope/dist/release) in Debian's headless chromium, served
from a loopback HTTP server (the app fetches #profileURL=...), save a screenshot, and print the
text tesseract reads in it (upper half: the flame graph's labels, magnified).

usage: speedscope_screenshot.py PROFILE.json OUT.png"""
import functools
import json
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading

profile, png = sys.argv[1], sys.argv[2]
tools = os.environ["FLAME_TOOLS"]
app = os.path.join(tools, "node/node_modules/speedscope/dist/release")
assert os.path.isfile(os.path.join(app, "index.html")), app
import jsonschema  # noqa: E402 (from $FLAME_TOOLS/py)

with open(os.path.join(app, "file-format-schema.json")) as f:
    schema = json.load(f)
with open(profile) as f:
    jsonschema.validate(json.load(f), schema)
root = tempfile.mkdtemp(prefix="speedscope-")
shutil.copytree(app, os.path.join(root, "app"))
shutil.copy(profile, os.path.join(root, "profile.json"))


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=root))
threading.Thread(target=server.serve_forever, daemon=True).start()
base = f"http://127.0.0.1:{server.server_address[1]}"
url = f"{base}/app/index.html#profileURL={base}/profile.json&title=hot"
browser = shutil.which("chromium") or shutil.which("chromium-browser")
assert browser, "chromium is missing (scripts/install-flame-tools.sh)"
subprocess.run(
    [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--force-device-scale-factor=2",
     "--window-size=1400,900", "--virtual-time-budget=15000", "--run-all-compositor-stages-before-draw",
     f"--user-data-dir={root}/profile-dir", f"--screenshot={png}", url],
    check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120,
)
server.shutdown()
assert os.path.getsize(png) > 0
out = subprocess.run(["tesseract", png, "-", "--psm", "11"], check=True, capture_output=True, timeout=120)
sys.stdout.write(out.stdout.decode("utf-8", "replace"))
