#!/usr/bin/env python3
"""A loopback SSQP symbol server for clrmap's tests (never a real server: tests reach nothing else).

    server.py --root DIR [--mode MODE] [--log FILE] [--wrong FILE]

Serves GET /<key> from DIR, where DIR is in the SSQP layout (name/index/name), case-insensitively
as Microsoft's server matches keys. Binds 127.0.0.1 on a free port and prints the port on the
first line of stdout. Each request is appended to --log as `PATH<TAB>SymbolChecksum header`.

Modes (how every request is answered), for the fault tests:
  ok        the file, or 404
  404       always 404
  500       always 500
  truncate  the file's Content-Length, then half its bytes, then the connection closes
  wrong     200 with the bytes of --wrong FILE (another PDB) for every key
  hang      accepts, reads the request, and never answers
  huge      Content-Length 4 GiB, then "BSJB" and zeros for as long as the client reads
  chunked   no length: "BSJB" then zeros, chunked, for as long as the client reads
  junk      200 with 4 GiB of zeros, chunked (not a PDB from its first byte)
  bomb      Content-Encoding gzip: a gzip stream of "BSJB" and 4 GiB of zeros, made as read
"""
import argparse
import http.server
import os
import sys
import time
import zlib


def find(root, key):
    """The file at KEY under ROOT, each component matched without regard to case."""
    here = root
    for part in key.split("/"):
        if part in ("", ".", ".."):
            return None
        try:
            names = os.listdir(here)
        except OSError:
            return None
        match = next((n for n in names if n.lower() == part.lower()), None)
        if match is None:
            return None
        here = os.path.join(here, match)
    return here if os.path.isfile(here) else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--mode", default="ok")
    ap.add_argument("--log")
    ap.add_argument("--wrong")
    args = ap.parse_args()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def send_chunk(self, data):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        def do_GET(self):
            if args.log:
                with open(args.log, "a") as f:
                    f.write("%s\t%s\n" % (self.path, self.headers.get("SymbolChecksum", "")))
            mode = args.mode
            key = self.path.lstrip("/")
            try:
                if mode == "hang":
                    time.sleep(3600)
                    return
                if mode in ("404", "500"):
                    self.send_response(int(mode))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if mode in ("huge", "chunked", "junk", "bomb"):
                    self.send_response(200)
                    if mode == "huge":
                        self.send_header("Content-Length", str(4 << 30))
                    else:
                        self.send_header("Transfer-Encoding", "chunked")
                    if mode == "bomb":
                        self.send_header("Content-Encoding", "gzip")
                    self.end_headers()
                    zeros = bytes(1 << 20)
                    if mode == "bomb":
                        z = zlib.compressobj(9, zlib.DEFLATED, 31)
                        self.send_chunk(z.compress(b"BSJB"))
                        for _ in range(4096):
                            out = z.compress(zeros)
                            if out:
                                self.send_chunk(out)
                        self.send_chunk(z.flush())
                        self.wfile.write(b"0\r\n\r\n")
                        return
                    first = b"" if mode == "junk" else b"BSJB"
                    if mode == "huge":
                        self.wfile.write(first)
                        for _ in range(4096):
                            self.wfile.write(zeros)
                        return
                    self.send_chunk(first + zeros)
                    for _ in range(4096):
                        self.send_chunk(zeros)
                    self.wfile.write(b"0\r\n\r\n")
                    return
                path = args.wrong if mode == "wrong" else find(args.root, key)
                if path is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with open(path, "rb") as f:
                    data = f.read()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Content-Type", "application/octet-stream")
                self.end_headers()
                if mode == "truncate":
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
