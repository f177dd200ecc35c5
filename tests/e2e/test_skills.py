"""Skills (Open Terminal 0.13, API.md Part A): GET /skills, /skills/read?name=, /skills/{name}.

Open WebUI lists a terminal user's skills and reads one before offering it to the model: from the
user's ~/.agents/skills, ~/.claude/skills, ~/.codex/skills, ~/.cptr/skills and the operator's
[agent] skills_dir, one per name (the user's own first, in that order). Each user sees only their
own home's skills and the operator's; a name that is a path is 404.
"""
import os
import uuid

import pytest

from conftest import running_daemon

OPS = "ops-report"


def skill_md(name, description, body):
    return f"---\nname: {name}\ndescription: {description}\n---\n\n{body}"


@pytest.fixture(scope="module")
def skills_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("skills")
    for name, description in ((OPS, "The operator's report skill."), ("shared", "the operator's shared")):
        (d / name).mkdir()
        (d / name / "SKILL.md").write_text(skill_md(name, description, f"Operator {name}.\n"))
    (d / OPS / "template.csv").write_text("a,b\n")
    os.chmod(d, 0o755)  # the accounts' uids read it
    return d


@pytest.fixture(scope="module")
def sdaemon(skills_dir):
    with running_daemon("skills", config_text=f'[agent]\nskills_dir = "{skills_dir}"\n') as d:
        yield d


@pytest.fixture
def user(sdaemon):
    c = sdaemon.client(user=f"sk-{uuid.uuid4().hex[:8]}")
    yield c
    c.close()


def write(client, path, content):
    r = client.post("/files/write", json={"path": path, "content": content})
    assert r.status_code == 200, r.text


def listing(client):
    r = client.get("/skills")
    assert r.status_code == 200, r.text
    items = r.json()
    assert isinstance(items, list), items  # a bare array, as Open WebUI reads it
    return {s["name"]: s for s in items}


def test_skills_from_each_folder_and_the_operators(user):
    for folder in (".agents", ".claude", ".codex", ".cptr"):
        name = "from" + folder.replace(".", "-")
        write(user, f"~/{folder}/skills/{name}/SKILL.md", skill_md(name, f"made in {folder}", "Do it.\n"))
    skills = listing(user)
    home = user.get("/files/cwd").json()["home"]
    for folder in (".agents", ".claude", ".codex", ".cptr"):
        s = skills["from" + folder.replace(".", "-")]
        assert s["description"] == f"made in {folder}"
        assert s["location"] == f"{home}/{folder}/skills/{s['name']}/SKILL.md"
        assert s["id"] == s["name"]
    assert skills[OPS]["description"] == "The operator's report skill."
    assert set(skills[OPS]) == {"id", "name", "description", "location"}


def test_duplicates_go_to_the_users_own_first_in_order(user):
    write(user, "~/.codex/skills/dup/SKILL.md", skill_md("dup", "codex", "from codex\n"))
    write(user, "~/.claude/skills/dup/SKILL.md", skill_md("dup", "claude", "from claude\n"))
    write(user, "~/.cptr/skills/other/SKILL.md", skill_md("shared", "the user's shared", "mine\n"))
    skills = listing(user)
    assert [n for n in skills if n == "dup"] == ["dup"]
    assert skills["dup"]["description"] == "claude"
    assert skills["shared"]["description"] == "the user's shared"  # before the operator's
    assert user.get("/skills/read", params={"name": "dup"}).json()["content"] == "from claude\n"
    assert user.get("/skills/shared").json()["content"] == "mine\n"


def test_read_strips_front_matter_and_lists_resources(user):
    write(user, "~/.claude/skills/pdf/SKILL.md",
          "---\nname: pdf\ndescription: >\n  Fill PDF forms\n  with the script.\nlicense: MIT\n---\n\n# PDF\nRun scripts/fill.py\n")
    write(user, "~/.claude/skills/pdf/scripts/fill.py", "print('filled')\n")
    write(user, "~/.claude/skills/pdf/forms.md", "forms\n")
    for r in (user.get("/skills/read", params={"name": "pdf"}), user.get("/skills/pdf")):
        assert r.status_code == 200, r.text
        s = r.json()
        assert s["name"] == "pdf"
        assert s["description"] == "Fill PDF forms with the script.\n"
        assert s["content"] == "# PDF\nRun scripts/fill.py\n"
        assert "---" not in s["content"] and "license" not in s["content"]
        assert s["location"].endswith("/.claude/skills/pdf/SKILL.md")
        assert s["resources"] == ["forms.md", "scripts/fill.py"]
    ops = user.get(f"/skills/{OPS}").json()
    assert ops["content"] == f"Operator {OPS}.\n"
    assert ops["resources"] == ["template.csv"]


def test_a_path_is_no_skill_name(user):
    write(user, "~/secret/SKILL.md", skill_md("secret", "not a skill", "private\n"))
    write(user, "~/.claude/skills/ok/SKILL.md", skill_md("ok", "fine", "ok\n"))
    for name in ("..", "../..", "../../secret", "ok/../../../secret", "/etc/passwd", "."):
        r = user.get("/skills/read", params={"name": name})
        assert r.status_code == 404, (name, r.text)
        assert "detail" in r.json()
    for path in ("/skills/..%2F..%2Fsecret", "/skills/%2E%2E", "/skills/ok/..%2F..%2Fsecret"):
        assert user.get(path).status_code == 404, path
    assert user.get("/skills/read", params={"name": "nope"}).status_code == 404
    assert user.get("/skills/ok").status_code == 200


def test_another_users_skills_are_invisible(sdaemon, user):
    write(user, "~/.claude/skills/private-one/SKILL.md", skill_md("private-one", "alice's", "alice only\n"))
    assert "private-one" in listing(user)
    with sdaemon.client(user=f"sk-{uuid.uuid4().hex[:8]}") as bob:
        skills = listing(bob)
        assert "private-one" not in skills
        assert OPS in skills  # the control: the operator's are everyone's
        assert bob.get("/skills/private-one").status_code == 404
        assert bob.get("/skills/read", params={"name": "private-one"}).status_code == 404


def test_a_user_without_skills_gets_the_operators_only(user):
    assert set(listing(user)) == {OPS, "shared"}


def test_skills_need_a_user(sdaemon):
    with sdaemon.client() as anonymous:
        assert anonymous.get("/skills").status_code == 400
