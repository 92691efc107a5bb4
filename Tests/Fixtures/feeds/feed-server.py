#!/usr/bin/env python3
"""A feed publisher on 127.0.0.1 for the feed tests (Tests/FeedTests, DaemonTests).

    feed-server.py ROOT

Serves the files under ROOT and prints "PORT <n>" on standard output once it
listens (on a port the kernel chose). Every request is appended to
ROOT/requests.log as one JSON object, so a test can count requests and see
the conditional headers it sent.

Paths:
    /f/NAME            the file, with ETag and Last-Modified; answers 304 to a
                       matching If-None-Match or a not-older If-Modified-Since
    /lazy/NAME         the file with Last-Modified (no ETag); answers 304 to any
                       If-Modified-Since at all, as some caches and mirrors do
    /plain/NAME        the file without ETag or Last-Modified
    /slow/NAME         headers at once, then the body a few bytes a second
    /stall/NAME        headers, half the body, then nothing until the client leaves
    /truncate/NAME     announces the whole length, sends half, closes
    /chunked/NAME      chunked transfer encoding, no Content-Length
    /redirect/NAME     302 to /f/NAME
    /status/CODE       an empty answer with that status

Files are re-read on every request, so a test publishes a new version by
rewriting a file. Only loopback: the server binds 127.0.0.1.
"""
import email.utils
import hashlib
import http.server
import json
import os
import socketserver
import sys
import threading
import time

ROOT = ""
LOG_LOCK = threading.Lock()


def log_request(entry):
    with LOG_LOCK:
        with open(os.path.join(ROOT, "requests.log"), "a") as f:
            f.write(json.dumps(entry) + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def record(self, status, sent):
        log_request({
            "path": self.path,
            "status": status,
            "if-none-match": self.headers.get("If-None-Match"),
            "if-modified-since": self.headers.get("If-Modified-Since"),
            "user-agent": self.headers.get("User-Agent"),
            "bytes": sent,
        })

    def load(self, name):
        path = os.path.normpath(os.path.join(ROOT, name))
        if not path.startswith(ROOT + os.sep) or not os.path.isfile(path):
            return None, None
        with open(path, "rb") as f:
            body = f.read()
        return body, os.stat(path).st_mtime

    def do_GET(self):
        parts = self.path.split("?")[0].lstrip("/").split("/", 1)
        mode = parts[0]
        name = parts[1] if len(parts) > 1 else ""
        if mode == "status":
            code = int(name)
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.record(code, 0)
            self.end_headers()
            return
        if mode == "redirect":
            self.send_response(302)
            self.send_header("Location", "/f/" + name)
            self.send_header("Content-Length", "0")
            self.record(302, 0)
            self.end_headers()
            return
        body, mtime = self.load(name)
        if body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.record(404, 0)
            self.end_headers()
            return
        etag = '"%s"' % hashlib.sha1(body).hexdigest()[:16]
        last_modified = email.utils.formatdate(int(mtime), usegmt=True)
        if mode == "f":
            inm = self.headers.get("If-None-Match")
            ims = self.headers.get("If-Modified-Since")
            not_modified = False
            if inm is not None:
                not_modified = etag in [t.strip() for t in inm.split(",")]
            elif ims is not None:
                try:
                    not_modified = email.utils.parsedate_to_datetime(ims).timestamp() >= int(mtime)
                except (TypeError, ValueError):
                    not_modified = False
            if not_modified:
                self.send_response(304)
                self.send_header("ETag", etag)
                self.record(304, 0)
                self.end_headers()
                return
        if mode == "lazy" and self.headers.get("If-Modified-Since") is not None:
            self.send_response(304)
            self.record(304, 0)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if mode == "f":
            self.send_header("ETag", etag)
            self.send_header("Last-Modified", last_modified)
        if mode == "lazy":
            self.send_header("Last-Modified", last_modified)
        if mode == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            sent = 0
            for i in range(0, len(body), 4096):
                chunk = body[i:i + 4096]
                try:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                except OSError:
                    break
                sent += len(chunk)
            else:
                self.wfile.write(b"0\r\n\r\n")
            self.record(200, sent)
            return
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if mode == "truncate" or mode == "stall":
            half = body[:len(body) // 2]
            self.wfile.write(half)
            self.wfile.flush()
            self.record(200, len(half))
            if mode == "stall":
                # Hold the connection until the client gives up.
                self.connection.settimeout(60)
                try:
                    while self.connection.recv(1):
                        pass
                except OSError:
                    pass
            self.close_connection = True
            return
        if mode == "slow":
            sent = 0
            try:
                for i in range(0, len(body), 16):
                    self.wfile.write(body[i:i + 16])
                    self.wfile.flush()
                    sent += len(body[i:i + 16])
                    time.sleep(0.5)
            except OSError:
                pass
            self.record(200, sent)
            self.close_connection = True
            return
        # Logged before the body goes out: a test reads the log as soon as its download ends.
        self.record(200, len(body))
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global ROOT
    ROOT = os.path.realpath(sys.argv[1])
    server = Server(("127.0.0.1", 0), Handler)
    print("PORT %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
