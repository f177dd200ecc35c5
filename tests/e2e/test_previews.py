"""Office previews (Open Terminal 0.12.3): GET /files/view?path=…&preview=true answers a Word,
PowerPoint or OpenDocument file rendered as PDF. Beyond Open Terminal: LibreOffice runs in the
user's own box as the user (one of its commands), stopped at [files] preview_timeout, and the
PDF is kept by content hash in the user's home; other types come back as their bytes.
"""
import hashlib
import io
import os
import subprocess
import tempfile
import time
import uuid

import docx
import pytest

from conftest import running_daemon, sh

PREVIEW_WAIT = 180  # LibreOffice's first start in a box makes its profile


@pytest.fixture(scope="module")
def pv_daemon():
    with running_daemon("previews", config_text="[files]\npreview_timeout = 120\n", lifetime=900) as d:
        yield d


def make_docx(paragraphs):
    doc = docx.Document()
    doc.add_heading("agentbox preview", 0)
    for p in paragraphs:
        doc.add_paragraph(p)
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


FODP = """<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
 xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"
 xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0"
 office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.presentation">
 <office:body><office:presentation>
  <draw:page draw:name="one"><draw:frame svg:x="2cm" svg:y="2cm" svg:width="20cm" svg:height="3cm">
   <draw:text-box><text:p>Slide one</text:p></draw:text-box></draw:frame></draw:page>
  <draw:page draw:name="two"><draw:frame svg:x="2cm" svg:y="2cm" svg:width="20cm" svg:height="3cm">
   <draw:text-box><text:p>Slide two</text:p></draw:text-box></draw:frame></draw:page>
 </office:presentation></office:body></office:document>
"""


def make_pptx():
    """A two-slide .pptx: a flat ODP written here, converted by the host's LibreOffice."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "deck.fodp")
        with open(src, "w") as f:
            f.write(FODP)
        subprocess.run(["soffice", f"-env:UserInstallation=file://{d}/profile", "--headless", "--norestore",
                        "--convert-to", "pptx", "--outdir", d, src],
                       check=True, capture_output=True, timeout=120)
        with open(os.path.join(d, "deck.pptx"), "rb") as f:
            return f.read()


def upload(client, name, data):
    r = client.post("/files/upload", params={"directory": "."}, files={"file": (name, data)})
    assert r.status_code == 200, r.text
    return r.json()["path"]


def pdfinfo(data):
    with tempfile.NamedTemporaryFile(suffix=".pdf") as f:
        f.write(data)
        f.flush()
        out = subprocess.run(["pdfinfo", f.name], check=True, capture_output=True, text=True).stdout
    return dict(line.split(":", 1) for line in out.splitlines() if ":" in line)


def preview(client, path, expect=200):
    r = client.get("/files/view", params={"path": path, "preview": "true"})
    assert r.status_code == expect, r.text[:2000]
    return r


def user(daemon):
    return daemon.client(user=f"pv-{uuid.uuid4().hex[:10]}", timeout=PREVIEW_WAIT)


def test_docx_previews_as_pdf_made_in_the_box_and_cached(pv_daemon):
    c = user(pv_daemon)
    data = make_docx(["hello from a docx"])
    path = upload(c, "report.docx", data)
    r = preview(c, path)
    assert r.headers["content-type"].startswith("application/pdf")
    assert int(pdfinfo(r.content)["Pages"]) >= 1
    # LibreOffice ran as one of the user's own commands, in the user's box.
    assert any(p["command"].startswith("office preview:") and p["status"] == "done" for p in c.get("/execute").json())
    # Kept by content hash in the user's home (so on the user's quota), and reused.
    cached = f"~/.cache/agentbox/previews/{hashlib.sha256(data).hexdigest()}.pdf"
    assert c.get("/files/display", params={"path": cached}).json()["exists"] is True
    t0 = time.monotonic()
    again = preview(c, path)
    assert again.content == r.content and time.monotonic() - t0 < 2
    runs = [p for p in c.get("/execute").json() if p["command"].startswith("office preview:")]
    assert len(runs) == 1  # the second answer came from the cache
    # Without preview=true, the same file's bytes as before.
    raw = c.get("/files/view", params={"path": path})
    assert raw.status_code == 200 and raw.content == data
    c.close()


def test_another_users_document_is_not_previewed(pv_daemon):
    alice, bob = user(pv_daemon), user(pv_daemon)
    path = upload(bob, "bob.docx", make_docx(["bob's words"]))
    assert path.startswith("/home/")
    r = alice.get("/files/view", params={"path": path, "preview": "true"})
    assert r.status_code in (403, 404) and "bob's words" not in r.text
    assert not any(p["command"].startswith("office preview:") for p in alice.get("/execute").json())
    assert preview(bob, path).headers["content-type"].startswith("application/pdf")  # control: bob's own
    alice.close()
    bob.close()


def test_pptx_previews_as_pdf(pv_daemon):
    c = user(pv_daemon)
    path = upload(c, "deck.pptx", make_pptx())
    r = preview(c, path)
    assert r.headers["content-type"].startswith("application/pdf")
    assert int(pdfinfo(r.content)["Pages"]) == 2
    c.close()


def test_other_types_return_their_bytes(pv_daemon):
    c = user(pv_daemon)
    c.post("/files/write", json={"path": "notes.txt", "content": "plain text\n"})
    r = preview(c, "notes.txt")
    assert r.content == b"plain text\n" and r.headers["content-type"].startswith("text/plain")
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
    upload(c, "pic.png", png)
    assert preview(c, "pic.png").content == png
    assert not any(p["command"].startswith("office preview:") for p in c.get("/execute").json())
    c.close()


def test_bad_input(pv_daemon):
    c = user(pv_daemon)
    assert preview(c, "missing.docx", expect=404).json()["detail"]
    # LibreOffice reads a .docx that is no zip as plain text: still a PDF, or else a 422 that
    # says why, never a 500 or a hang.
    upload(c, "broken.docx", b"this is not a zip")
    r = c.get("/files/view", params={"path": "broken.docx", "preview": "true"})
    if r.status_code == 200:
        assert int(pdfinfo(r.content)["Pages"]) >= 1
    else:
        assert r.status_code == 422 and r.json()["detail"].startswith("LibreOffice could not convert"), r.text
    c.close()


def test_conversion_is_stopped_at_the_limit():
    # A long document and a 1 s limit: LibreOffice is still at work when the limit comes.
    with running_daemon("previews-limit", config_text="[files]\npreview_timeout = 1\n", lifetime=300) as d:
        c = user(d)
        path = upload(c, "long.docx", make_docx([f"paragraph {i} " * 20 for i in range(3000)]))
        t0 = time.monotonic()
        r = preview(c, path, expect=504)
        assert "preview_timeout" in r.json()["detail"]
        assert time.monotonic() - t0 < 30
        runs = [p for p in c.get("/execute").json() if p["command"].startswith("office preview:")]
        assert runs and runs[0]["status"] == "killed"
        # Nothing of it runs on in the box, and no half-made PDF is kept.
        running = sh(c, "ps -eo comm=")[1]
        assert "ps" in running and "soffice" not in running, running
        listing = sh(c, "ls -A ~/.cache/agentbox/previews 2>/dev/null || true")[1]
        assert ".pdf" not in listing
        c.close()
