"""/files/*: every route's success path and its documented errors, in the caller's own home."""
import io
import struct
import zipfile
import zlib

import httpx
import pytest

from conftest import assert_alive, home_of, sh


def png_bytes():
    """A valid 1x1 PNG."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))


@pytest.fixture
def user(clients):
    """A fresh user with a small tree: notes.txt, src/{a.py,b.py,data.bin}, docs/readme.md."""
    c = clients.user("files")
    c.home = home_of(c)
    code, _, err = sh(c, "mkdir -p src/pkg docs && printf 'one\\ntwo\\nthree\\n' > notes.txt && "
                         "printf 'import os\\nprint(1)\\n' > src/a.py && printf 'x = 1\\n' > src/pkg/b.py && "
                         "printf 'Hello World\\nhello again\\n' > docs/readme.md && "
                         "head -c 2048 /dev/zero > src/data.bin && printf '\\001\\377' >> src/data.bin")
    assert code == 0, err
    return c


# ---- list -----------------------------------------------------------------------------------

def test_list(user):
    r = user.get("/files/list", params={"directory": "."})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["dir"] == user.home
    names = [e["name"] for e in body["entries"]]
    assert names == sorted(names) == ["docs", "notes.txt", "src"]
    by_name = {e["name"]: e for e in body["entries"]}
    assert by_name["notes.txt"]["type"] == "file" and by_name["notes.txt"]["size"] == 14
    assert by_name["src"]["type"] == "directory"
    assert all(e["writable"] is True for e in body["entries"])
    assert all(isinstance(e["modified"], (int, float, str)) for e in body["entries"])
    # Default directory is the cwd; other path forms.
    assert user.get("/files/list").json()["entries"] == body["entries"]
    for form in ("src", "~/src", f"{user.home}/src", "docs/../src/"):
        r = user.get("/files/list", params={"directory": form})
        assert r.status_code == 200, form
        assert [e["name"] for e in r.json()["entries"]] == ["a.py", "data.bin", "pkg"]


def test_list_errors(user):
    assert user.get("/files/list", params={"directory": "missing"}).status_code == 404
    for outside in ("/", "/etc", "..", "/home", "~/..", "/proc/self/root"):
        assert user.get("/files/list", params={"directory": outside}).status_code == 403, outside


# ---- read -----------------------------------------------------------------------------------

def test_read_text_and_line_ranges(user):
    r = user.get("/files/read", params={"path": "notes.txt"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["path"] == f"{user.home}/notes.txt"
    assert (body["total_lines"], body["content"]) == (3, "one\ntwo\nthree\n")
    r = user.get("/files/read", params={"path": "~/notes.txt", "start_line": 2, "end_line": 2})
    assert (r.json()["total_lines"], r.json()["content"]) == (3, "two\n")
    r = user.get("/files/read", params={"path": "notes.txt", "start_line": 2})
    assert r.json()["content"] == "two\nthree\n"
    r = user.get("/files/read", params={"path": "notes.txt", "start_line": "null", "end_line": "null"})
    assert r.json()["content"] == "one\ntwo\nthree\n"


def test_read_image_is_raw_and_binary_is_415(user):
    png = png_bytes()
    assert user.post("/files/upload", params={"directory": "."},
                     files={"file": ("dot.png", png, "image/png")}).status_code == 200
    r = user.get("/files/read", params={"path": "dot.png"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("image/png")
    assert r.content == png
    r = user.get("/files/read", params={"path": "src/data.bin"})
    assert r.status_code == 415, r.text
    assert r.json()["detail"]


def test_read_budget_truncates_big_files(user):
    sh(user, "seq 1 2000000 > big.txt")
    r = user.get("/files/read", params={"path": "big.txt"})
    assert r.status_code == 200
    body = r.json()
    assert body["truncated"] is True
    assert len(body["content"]) < len("".join(f"{i}\n" for i in range(1, 2000001)))
    assert body["content"].startswith("1\n2\n3\n")
    # read on with start_line
    r = user.get("/files/read", params={"path": "big.txt", "start_line": 1999999})
    assert r.json()["content"] == "1999999\n2000000\n"


def test_read_goes_on_inside_a_line_longer_than_the_budget(user):
    """A single line of 300,000 characters (a minified bundle): read_file gives it in pieces,
    each saying where the next starts, until all of it was read."""
    assert sh(user, "python3 -c \"print('abcdefghij' * 30000, end='')\" > min.js")[0] == 0
    got, params = "", {"path": "min.js"}
    for _ in range(10):
        body = user.get("/files/read", params=params).json()
        got += body["content"]
        assert body["total_lines"] == 1
        if not body["truncated"]:
            break
        params = {"path": "min.js", "start_line": body["next_start_line"],
                  "start_column": body["next_start_column"]}
    assert got == "abcdefghij" * 30000


def test_read_decodes_text_that_is_not_utf8(user):
    """A Latin-1 text file is text: decoded, not 415 "Unsupported binary file type"."""
    assert sh(user, "printf 'caf\\351 cr\\350me\\n' > latin1.txt")[0] == 0
    r = user.get("/files/read", params={"path": "latin1.txt"})
    assert r.status_code == 200, r.text
    assert r.json()["content"] == "café crème\n"
    assert r.json()["encoding"] == "windows-1252"


def test_read_errors(user):
    assert user.get("/files/read", params={"path": "missing.txt"}).status_code == 404
    assert user.get("/files/read", params={"path": "src"}).status_code in (400, 404)
    assert user.get("/files/read").status_code == 422
    assert user.get("/files/read", params={"path": "notes.txt", "start_line": 0}).status_code == 422
    assert user.get("/files/read", params={"path": "notes.txt", "start_line": "x"}).status_code == 422
    for outside in ("/etc/passwd", "../x", "/proc/self/environ", "/proc/self/root/etc/passwd", "~/../x"):
        assert user.get("/files/read", params={"path": outside}).status_code == 403, outside


# ---- display, view, serve -------------------------------------------------------------------

def test_display(user):
    r = user.get("/files/display", params={"path": "notes.txt"})
    assert r.status_code == 200 and r.json() == {"path": f"{user.home}/notes.txt", "exists": True}
    r = user.get("/files/display", params={"path": "nope.html"})
    assert r.status_code == 200 and r.json() == {"path": f"{user.home}/nope.html", "exists": False}
    assert user.get("/files/display", params={"path": "/etc/passwd"}).status_code == 403


def test_view_raw_with_content_type_and_ranges(user):
    user.post("/files/write", json={"path": "site/index.html", "content": "<h1>hi</h1>"})
    r = user.get("/files/view", params={"path": "site/index.html"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    assert r.content == b"<h1>hi</h1>"
    r = user.get("/files/view", params={"path": "src/data.bin"})
    assert r.status_code == 200 and len(r.content) == 2050
    r = user.get("/files/view", params={"path": "notes.txt"}, headers={"Range": "bytes=4-6"})
    assert r.status_code == 206
    assert r.content == b"two"
    assert r.headers["content-range"] == "bytes 4-6/14"
    assert user.get("/files/view", params={"path": "missing"}).status_code == 404
    assert user.get("/files/view", params={"path": "/etc/passwd"}).status_code == 403


def test_serve_for_relative_urls(user):
    user.post("/files/write", json={"path": "site/index.html", "content": "<link href='style.css'>"})
    user.post("/files/write", json={"path": "site/style.css", "content": "h1{}"})
    r = user.get(f"/files/serve{user.home}/site/index.html")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    r = user.get(f"/files/serve{user.home}/site/style.css")
    assert r.status_code == 200 and r.text == "h1{}"
    assert r.headers["content-type"].startswith("text/css")
    assert user.get(f"/files/serve{user.home}/site/missing.js").status_code == 404
    assert user.get("/files/serve/etc/passwd").status_code == 403


# ---- write, replace, mkdir, delete, move ----------------------------------------------------

def test_write_creates_parents_owned_by_the_user(user):
    r = user.post("/files/write", json={"path": "new/deep/dir/f.txt", "content": "héllo\n"})
    assert r.status_code == 200, r.text
    assert r.json() == {"path": f"{user.home}/new/deep/dir/f.txt", "size": 7}
    assert sh(user, "cat new/deep/dir/f.txt")[1] == "héllo\n"
    owner = sh(user, "stat -c %U new/deep/dir/f.txt new/deep")[1].split()
    assert owner == [sh(user, "id -un")[1].strip()] * 2
    # Overwrite replaces the whole content.
    user.post("/files/write", json={"path": "new/deep/dir/f.txt", "content": "x"})
    assert sh(user, "cat new/deep/dir/f.txt")[1] == "x"
    # Unknown fields are ignored; empty content is fine.
    r = user.post("/files/write", json={"path": "empty", "content": "", "mode": "w", "foo": None})
    assert r.status_code == 200 and r.json()["size"] == 0


def test_write_errors(user):
    assert user.post("/files/write", json={"path": "x"}).status_code == 422
    assert user.post("/files/write", json={"content": "x"}).status_code == 422
    assert user.post("/files/write", json={"path": "x", "content": 5}).status_code == 422
    assert user.post("/files/write", json={"path": "src", "content": "x"}).status_code in (400, 409)
    for outside in ("/etc/x", "../x", "/tmp/x", "~/../x"):
        assert user.post("/files/write", json={"path": outside, "content": "x"}).status_code == 403


def test_replace(user):
    sh(user, "printf 'a = 1\\nb = 1\\nc = 2\\n' > cfg.py")
    r = user.post("/files/replace", json={"path": "cfg.py", "replacements": [
        {"target": "c = 2", "replacement": "c = 3"}]})
    assert r.status_code == 200, r.text
    assert r.json() == {"path": f"{user.home}/cfg.py", "size": 18}
    r = user.post("/files/replace", json={"path": "cfg.py", "replacements": [
        {"target": "= 1", "replacement": "= 9"}]})
    assert r.status_code == 400 and "Found 2 occurrences" in r.json()["detail"]
    r = user.post("/files/replace", json={"path": "cfg.py", "replacements": [
        {"target": "zzz", "replacement": "y"}]})
    assert r.status_code == 400 and r.json()["detail"].startswith("Target string not found")
    r = user.post("/files/replace", json={"path": "cfg.py", "replacements": [
        {"target": "= 1", "replacement": "= 5", "start_line": 2, "end_line": 2},
        {"target": "c = 3", "replacement": "c = 4", "allow_multiple": False}]})
    assert r.status_code == 200
    assert sh(user, "cat cfg.py")[1] == "a = 1\nb = 5\nc = 4\n"
    r = user.post("/files/replace", json={"path": "cfg.py", "replacements": [
        {"target": " = ", "replacement": "=", "allow_multiple": True}]})
    assert r.status_code == 200 and sh(user, "cat cfg.py")[1] == "a=1\nb=5\nc=4\n"
    # A failed edit changes nothing.
    r = user.post("/files/replace", json={"path": "cfg.py", "replacements": [
        {"target": "a=1", "replacement": "A"}, {"target": "missing", "replacement": "M"}]})
    assert r.status_code == 400 and sh(user, "cat cfg.py")[1] == "a=1\nb=5\nc=4\n"
    assert user.post("/files/replace", json={"path": "nope.py", "replacements": [
        {"target": "a", "replacement": "b"}]}).status_code == 404
    assert user.post("/files/replace", json={"path": "cfg.py"}).status_code == 422
    assert user.post("/files/replace", json={"path": "cfg.py", "replacements": [{"target": "a"}]}).status_code == 422
    assert user.post("/files/replace", json={"path": "/etc/passwd", "replacements": [
        {"target": "root", "replacement": "x"}]}).status_code == 403


def test_mkdir_delete(user):
    r = user.post("/files/mkdir", json={"path": "m/n/o"})
    assert r.status_code == 200 and r.json()["path"] == f"{user.home}/m/n/o"
    assert sh(user, "test -d m/n/o")[0] == 0
    assert user.post("/files/mkdir", json={"path": "/etc/m"}).status_code == 403
    assert user.post("/files/mkdir", json={}).status_code == 422

    # Open Terminal's answer, plus the trash item it went to (test_storage.py).
    r = user.delete("/files/delete", params={"path": "notes.txt"})
    assert r.status_code == 200 and r.json()["path"] == f"{user.home}/notes.txt" and r.json()["type"] == "file"
    assert r.json()["trash"]
    r = user.delete("/files/delete", params={"path": "m"})
    assert r.status_code == 200 and r.json()["path"] == f"{user.home}/m" and r.json()["type"] == "directory"
    assert sh(user, "test -e m || test -e notes.txt")[0] != 0
    assert user.delete("/files/delete", params={"path": "m"}).status_code == 404
    for refused in ("/etc/passwd", "..", "~/..", "/"):
        assert user.delete("/files/delete", params={"path": refused}).status_code == 403, refused
    # Deleting the home itself is refused (400 or 403), and it stays.
    assert user.delete("/files/delete", params={"path": "~"}).status_code in (400, 403)
    assert sh(user, "test -d ~/src")[0] == 0


def test_move(user):
    r = user.post("/files/move", json={"source": "notes.txt", "destination": "docs/notes.txt"})
    assert r.status_code == 200, r.text
    assert sh(user, "cat docs/notes.txt")[1] == "one\ntwo\nthree\n"
    assert user.post("/files/move", json={"source": "notes.txt", "destination": "n2"}).status_code == 404
    assert user.post("/files/move", json={"source": "docs/notes.txt", "destination": "nodir/x"}).status_code == 400
    assert user.post("/files/move", json={"source": "docs/notes.txt", "destination": "docs/readme.md"}).status_code == 409
    assert sh(user, "cat docs/readme.md")[1] == "Hello World\nhello again\n"
    assert user.post("/files/move", json={"source": "src", "destination": "/tmp/src"}).status_code == 403
    assert user.post("/files/move", json={"source": "/etc/passwd", "destination": "p"}).status_code == 403
    assert user.post("/files/move", json={"source": "src"}).status_code == 422


# ---- grep, glob -----------------------------------------------------------------------------

def test_grep(user):
    r = user.get("/files/grep", params={"query": "hel+o", "path": "."})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["query"] == "hel+o" and body["truncated"] is False
    assert [(m["file"].split("/")[-1], m["line"], m["content"]) for m in body["matches"]] == [
        ("readme.md", 2, "hello again")]
    r = user.get("/files/grep", params={"query": "HELLO", "case_insensitive": "true"})
    assert len(r.json()["matches"]) == 2
    r = user.get("/files/grep", params={"query": "(", "regex": "false"})
    assert r.status_code == 200 and r.json()["matches"][0]["content"] == "print(1)"
    r = user.get("/files/grep", params=[("query", "o"), ("include", "*.py"), ("include", "*.txt")])
    files = {m["file"].split("/")[-1] for m in r.json()["matches"]}
    assert files == {"a.py", "notes.txt"}
    r = user.get("/files/grep", params={"query": "o", "match_per_line": "false"})
    assert sorted(m["file"].split("/")[-1] for m in r.json()["matches"]) == ["a.py", "notes.txt", "readme.md"]
    r = user.get("/files/grep", params={"query": "o", "max_results": 1})
    assert len(r.json()["matches"]) == 1 and r.json()["truncated"] is True
    r = user.get("/files/grep", params={"query": "x", "path": "src/pkg/b.py"})
    assert [m["line"] for m in r.json()["matches"]] == [1]
    # Binary files are skipped, not an error.
    assert user.get("/files/grep", params={"query": ".", "path": "src/data.bin"}).status_code == 200


def test_grep_errors(user):
    assert user.get("/files/grep", params={"query": "x", "path": "missing"}).status_code == 404
    assert user.get("/files/grep", params={"query": "(", "regex": "true"}).status_code in (400, 422)
    assert user.get("/files/grep").status_code == 422
    for n in (0, 501, "many"):
        assert user.get("/files/grep", params={"query": "x", "max_results": n}).status_code == 422
    assert user.get("/files/grep", params={"query": "root", "path": "/etc"}).status_code == 403
    # Linear-time regexes: a catastrophic-backtracking pattern answers quickly.
    user.post("/files/write", json={"path": "redos.txt", "content": "a" * 5000 + "!"})
    r = user.get("/files/grep", params={"query": "(a+)+$", "path": "redos.txt"}, timeout=10)
    assert r.status_code in (200, 400, 422)


def test_glob(user):
    r = user.get("/files/glob", params={"pattern": "**/*.py"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["pattern"] == "**/*.py" and body["truncated"] is False
    paths = sorted(m["path"].removeprefix(user.home + "/") for m in body["matches"])
    assert paths == ["src/a.py", "src/pkg/b.py"]
    assert all(m["type"] == "file" and m["size"] > 0 for m in body["matches"])
    r = user.get("/files/glob", params={"pattern": "*", "path": "src", "type": "directory"})
    assert [m["path"].split("/")[-1] for m in r.json()["matches"]] == ["pkg"]
    r = user.get("/files/glob", params=[("pattern", "**/*"), ("exclude", "src/**"), ("type", "file")])
    names = sorted(m["path"].split("/")[-1] for m in r.json()["matches"])
    assert names == ["notes.txt", "readme.md"]
    r = user.get("/files/glob", params={"pattern": "**/*", "max_results": 2})
    assert len(r.json()["matches"]) == 2 and r.json()["truncated"] is True


def test_glob_errors(user):
    assert user.get("/files/glob", params={"pattern": "*", "path": "missing"}).status_code == 404
    assert user.get("/files/glob").status_code == 422
    assert user.get("/files/glob", params={"pattern": "*", "type": "socket"}).status_code == 422
    assert user.get("/files/glob", params={"pattern": "*", "path": "/"}).status_code == 403


# ---- upload, archive ------------------------------------------------------------------------

def test_upload(user):
    data = bytes(range(256)) * 100
    r = user.post("/files/upload", params={"directory": "docs"}, files={"file": ("blob.bin", data)})
    assert r.status_code == 200, r.text
    assert r.json() == {"path": f"{user.home}/docs/blob.bin", "size": len(data)}
    assert user.get("/files/view", params={"path": "docs/blob.bin"}).content == data
    assert user.post("/files/upload", params={"directory": "/tmp"},
                     files={"file": ("x", b"x")}).status_code == 403
    # A file name with directories: refused, or reduced to its last component (Open Terminal).
    r = user.post("/files/upload", params={"directory": "docs"}, files={"file": ("../../escape", b"x")})
    assert r.status_code in (200, 400, 403)
    if r.status_code == 200:
        assert r.json()["path"] == f"{user.home}/docs/escape"
    assert user.post("/files/upload", params={"directory": "."},
                     files={"other": ("x", b"x")}).status_code in (400, 422)


def test_archive(user):
    r = user.post("/files/archive", json={"paths": ["src", "notes.txt"]})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/zip")
    assert "attachment" in r.headers.get("content-disposition", "")
    z = zipfile.ZipFile(io.BytesIO(r.content))
    names = {n.rstrip("/") for n in z.namelist()}
    assert any(n.endswith("notes.txt") for n in names)
    assert any(n.endswith("src/a.py") for n in names)
    a_py = next(n for n in z.namelist() if n.endswith("src/a.py"))
    assert z.read(a_py) == b"import os\nprint(1)\n"
    assert all(not n.startswith("/") and ".." not in n.split("/") for n in z.namelist())
    assert user.post("/files/archive", json={"paths": ["missing"]}).status_code == 404
    assert user.post("/files/archive", json={"paths": ["/etc/passwd"]}).status_code == 403
    assert user.post("/files/archive", json={}).status_code == 422


def test_nul_in_paths_is_400(user):
    for method, path, kw in [
        ("GET", "/files/read?path=notes.txt%00.png", {}),
        ("GET", "/files/list?directory=src%00", {}),
        ("GET", "/files/view?path=a%00b", {}),
        ("GET", "/files/display?path=a%00b", {}),
        ("DELETE", "/files/delete?path=notes.txt%00", {}),
        ("GET", "/files/grep?query=x&path=src%00", {}),
        ("POST", "/files/write", {"json": {"path": "a\u0000b", "content": "x"}}),
        ("POST", "/files/mkdir", {"json": {"path": "d\u0000"}}),
        ("POST", "/execute", {"json": {"command": "true", "cwd": "src\u0000"}}),
    ]:
        r = user.request(method, path, **kw)
        assert r.status_code == 400, (method, path, r.status_code, r.text)
    assert sh(user, "cat notes.txt")[1] == "one\ntwo\nthree\n"


def test_null_query_params_are_ignored(user):
    r = user.get("/files/list?directory=null")
    assert r.status_code == 200 and r.json()["dir"] == user.home
    r = user.get("/files/read?path=notes.txt&start_line=null&end_line=NULL")
    assert r.json()["content"] == "one\ntwo\nthree\n"
    r = user.get("/files/grep?query=two&path=null&regex=null&include=null&max_results=null")
    assert r.status_code == 200 and len(r.json()["matches"]) == 1
    r = user.get("/files/glob?pattern=*.txt&path=null&type=null&exclude=null")
    assert r.status_code == 200 and len(r.json()["matches"]) == 1


def test_fifos_and_deep_trees_never_hang(user, daemon):
    # A FIFO opened for reading would block a worker until a writer comes; a deep tree would
    # exhaust a recursive walker. Each answers at once, and the daemon keeps serving.
    script = ("import os\nos.chdir(os.path.expanduser('~')); os.mkfifo('fifo'); os.mkfifo('src/fifo2')\n"
              "os.mkdir('deep'); os.chdir('deep')\n"
              "for i in range(3000): os.mkdir('x'); os.chdir('x')\n"
              "open('f.txt', 'w').write('found')\nos.symlink('loop2', 'loop1'); os.symlink('loop1', 'loop2')\n")
    assert sh(user, "/usr/bin/python3", stdin=script)[0] == 0
    fast = httpx.Timeout(10.0)
    for method, url, kw in [
        ("GET", "/files/read?path=fifo", {}), ("GET", "/files/view?path=fifo", {}),
        ("GET", "/files/grep?query=x&path=src", {}), ("GET", "/files/grep?query=x&path=fifo", {}),
        ("POST", "/files/archive", {"json": {"paths": ["src"]}}),
        ("POST", "/files/replace", {"json": {"path": "fifo", "replacements": [{"target": "a", "replacement": "b"}]}}),
        ("GET", "/files/display?path=fifo", {}),
        ("GET", "/files/grep?query=found&path=deep", {}), ("GET", "/files/glob?pattern=**/f.txt&path=deep", {}),
        ("POST", "/files/archive", {"json": {"paths": ["deep"]}}),
        ("GET", "/files/read?path=deep/" + "x/" * 3000 + "loop1", {}),
        ("DELETE", "/files/delete?path=deep", {}),
    ]:
        r = user.request(method, url, timeout=fast, **kw)
        assert r.status_code < 500, (url[:80], r.status_code, r.text[:200])
        if "fifo" in url and r.status_code == 200 and "display" in url:
            assert r.json()["exists"] is False
    assert_alive(daemon)
