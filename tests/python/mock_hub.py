"""A local stand-in for the Hugging Face Hub, for tests without the internet.

Serves, on 127.0.0.1 (a free port), the endpoints `tachyon pull` uses:

  GET  /api/models/ORG/NAME/revision/REV[?blobs=true]
       {"id", "sha", "siblings": [{"rfilename", "size", "blobId", "lfs": {"sha256", "size"}}]}
  HEAD/GET /ORG/NAME/resolve/REV/FILE
       small (non-LFS) files: 200, ETag = git blob sha1, X-Repo-Commit, Content-Length
       LFS files (*.safetensors, *.gguf, *.bin): 302 to /cdn/SHA256 with X-Linked-Etag (the
       sha256), X-Linked-Size and X-Repo-Commit, as the real Hub redirects to its CDN
  GET  /cdn/SHA256   the contents, with Range support (206 / Content-Range)

Knobs (attributes, change them between requests):
  drop_after        None, or a byte count: file bodies are cut after that many bytes (the
                    connection is closed) ...
  drop_times        ... this many times (then served whole)
  corrupt           True: LFS contents are served with one byte flipped (same headers)
  blobs_info        False: the API omits size/lfs (the client must use HEAD headers)
  offline           True: every request gets a closed connection
  token             a required bearer token (None: public)
Every request is logged in `requests` as (method, path, Range header or None).
"""

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

LFS_SUFFIXES = (".safetensors", ".gguf", ".bin")


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, files: dict, commit: str):
        self.files = files  # path -> bytes
        self.commit = commit


class MockHub:
    def __init__(self):
        self.repos = {}
        self.requests = []
        self.drop_after = None
        self.drop_times = 0
        self.corrupt = False
        self.blobs_info = True
        self.offline = False
        self.token = None
        self._lock = threading.Lock()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_HEAD(self):
                hub._handle(self, head=True)

            def do_GET(self):
                hub._handle(self, head=False)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def add_repo(self, repo: str, files: dict, commit: str = None):
        if commit is None:
            h = hashlib.sha1(repo.encode())
            for name in sorted(files):
                h.update(name.encode() + hashlib.sha256(files[name]).digest())
            commit = h.hexdigest()
        self.repos[repo] = Repo(files, commit)
        return commit

    def served(self, method=None, prefix=""):
        with self._lock:
            return [r for r in self.requests
                    if (method is None or r[0] == method) and r[1].startswith(prefix)]

    # ---- request handling ----

    def _send(self, h, code, headers=None, body=b"", head=False):
        h.send_response(code)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        if "Content-Length" not in (headers or {}):
            h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head and body:
            h.wfile.write(body)

    def _error(self, h, code, message, head):
        body = json.dumps({"error": message}).encode()
        self._send(h, code, {"Content-Type": "application/json", "X-Error-Message": message},
                   body, head)

    def _find(self, rest):
        # ORG/NAME/... -> (repo, remainder)
        parts = rest.split("/", 2)
        if len(parts) < 3:
            return None, None
        repo = parts[0] + "/" + parts[1]
        return self.repos.get(repo), parts[2]

    def _handle(self, h, head):
        path = unquote(urlsplit(h.path).path)
        with self._lock:
            self.requests.append((h.command, path, h.headers.get("Range")))
        if self.offline:
            h.close_connection = True
            h.connection.close()
            return
        if self.token is not None and not path.startswith("/cdn/"):
            if h.headers.get("Authorization") != f"Bearer {self.token}":
                return self._error(h, 401, "Access to this model is restricted", head)
        if path.startswith("/api/models/"):
            return self._api(h, path[len("/api/models/"):], head)
        if path.startswith("/cdn/"):
            return self._cdn(h, path[len("/cdn/"):], head)
        repo, rest = self._find(path.lstrip("/"))
        if repo is None or not rest.startswith("resolve/"):
            return self._error(h, 404, "Repository not found", head)
        rev, _, name = rest[len("resolve/"):].partition("/")
        if rev not in ("main", repo.commit):
            return self._error(h, 404, "Revision not found", head)
        if name not in repo.files:
            return self._error(h, 404, "Entry not found", head)
        data = repo.files[name]
        if name.endswith(LFS_SUFFIXES):
            sha = hashlib.sha256(data).hexdigest()
            return self._send(h, 302, {
                "Location": f"/cdn/{sha}",
                "X-Linked-Etag": f'"{sha}"',
                "X-Linked-Size": str(len(data)),
                "X-Repo-Commit": repo.commit,
                "ETag": '"redirect-etag"',
            }, b"", head)
        headers = {"ETag": f'"{git_blob_sha1(data)}"', "X-Repo-Commit": repo.commit}
        return self._body(h, data, headers, head)

    def _api(self, h, rest, head):
        repo, tail = self._find(rest)
        if repo is None:
            return self._error(h, 404, "Repository not found", head)
        if not tail.startswith("revision/"):
            return self._error(h, 404, "Not found", head)
        rev = tail[len("revision/"):]
        if rev not in ("main", repo.commit):
            return self._error(h, 404, "Revision not found", head)
        siblings = []
        for name in sorted(repo.files):
            data = repo.files[name]
            s = {"rfilename": name}
            if self.blobs_info:
                s["size"] = len(data)
                s["blobId"] = git_blob_sha1(data)
                if name.endswith(LFS_SUFFIXES):
                    s["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                                "pointerSize": 134}
            siblings.append(s)
        body = json.dumps({"id": rest.split("/revision/")[0], "sha": repo.commit,
                           "siblings": siblings}).encode()
        return self._send(h, 200, {"Content-Type": "application/json"}, body, head)

    def _cdn(self, h, sha, head):
        for repo in self.repos.values():
            for name, data in repo.files.items():
                if hashlib.sha256(data).hexdigest() == sha:
                    if self.corrupt:
                        data = bytes([data[0] ^ 0xFF]) + data[1:]
                    return self._body(h, data, {"ETag": f'"{sha}"'}, head)
        return self._error(h, 404, "blob not found", head)

    def _body(self, h, data, headers, head):
        start = 0
        code = 200
        rng = h.headers.get("Range")
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[len("bytes="):-1])
            if start >= len(data):
                return self._send(h, 416, {"Content-Range": f"bytes */{len(data)}"}, b"", head)
            code = 206
            headers = dict(headers, **{"Content-Range": f"bytes {start}-{len(data) - 1}/{len(data)}"})
        chunk = data[start:]
        headers = dict(headers, **{"Content-Length": str(len(chunk)), "Accept-Ranges": "bytes"})
        if head:
            return self._send(h, code, headers, b"", head=True)
        drop = False
        with self._lock:
            if self.drop_after is not None and self.drop_times > 0 and len(chunk) > self.drop_after:
                self.drop_times -= 1
                drop = True
        if not drop:
            return self._send(h, code, headers, chunk)
        h.send_response(code)
        for k, v in headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(chunk[:self.drop_after])
        h.wfile.flush()
        h.close_connection = True
        h.connection.shutdown(2)
