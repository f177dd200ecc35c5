"""A daily token budget holds requests in flight (issue 30, finding 5). It was checked only when
a request started: 20 requests sent at once all started with nothing spent, and spent 40,000
tokens of a 3,000 budget. Now each request reserves its worst case (max_tokens, and its body's
bytes plus an allowance for input: src/net/request_worst_case.hpp) before it is forwarded, and
the answer's counts replace the reservation when it ends.

The upstream is the scripted fake (tests/fakes/fake_anthropic.py): it holds every answer open
until the test releases it, so all the requests that get through are in flight together, and
each answer reports 1,150 tokens, within its request's worst case, as the real API's would be.
"""
import json
import shlex
import time
import uuid

import pytest

from e2e_conftest import run, running_daemon, sh, wait_done
from fake_anthropic import FakeAnthropic, held, text

BUDGET = 10_000
MAX_TOKENS = 1_000
USAGE = {"input_tokens": 150, "output_tokens": MAX_TOKENS, "cache_creation_input_tokens": 0,
         "cache_read_input_tokens": 0}
USED = sum(USAGE.values())  # what one answer reports
ALLOWANCE = 1024            # kPromptAllowance
REQUEST_MEMORY = 64 << 10  # the least [inference] request_memory may be


def body(model):
    return json.dumps({"model": model, "max_tokens": MAX_TOKENS, "stream": True,
                       "messages": [{"role": "user", "content": "count to three"}]})


def worst_case(model):
    return MAX_TOKENS + len(body(model)) + ALLOWANCE


# Runs in the box: N requests at once to the gateway, each on its own connection; prints one
# JSON line per request: {"status": ..., "body": ...}.
AT_ONCE = r'''
import json, subprocess, sys
n, body = int(sys.argv[1]), sys.argv[2]
procs = [subprocess.Popen(["curl", "-sS", "--max-time", "60", "-w", "\n%{http_code}",
                           "http://127.0.0.1:3129/v1/messages?beta=true", "-H", "content-type: application/json",
                           "--data-binary", body], stdout=subprocess.PIPE, text=True) for _ in range(n)]
for p in procs:
    out, _ = p.communicate()
    answer, _, status = out.rpartition("\n")
    print(json.dumps({"status": int(status or 0), "body": answer}))
'''


@pytest.fixture(scope="module")
def fake():
    f = FakeAnthropic()
    f.route(lambda r: r.model == "held", held(text("one two three", usage=USAGE, times=None)))
    f.route(lambda r: r.model == "plain", text("one two three", usage=USAGE, times=None))
    yield f
    f.close()


@pytest.fixture(scope="module")
def bdaemon(fake):
    config = (f'[inference]\nrequest_memory = "{REQUEST_MEMORY}B"\n'
              f'[inference.anthropic]\nupstream = "http://127.0.0.1:{fake.port}"\ndaily_tokens = {BUDGET}\n')
    with running_daemon("gw-budget", config_text=config, env={"AGENTBOX_ANTHROPIC_API_KEY": "sk-ant-api03-b"}) as d:
        yield d


@pytest.fixture
def user(bdaemon):
    c = bdaemon.client(user=f"gwb-{uuid.uuid4().hex[:8]}")
    yield c
    c.close()


def tokens_today(client):
    return client.get("/usage").json()["tokens"]


def send_at_once(client, n, model):
    return run(client, f"python3 -c {shlex.quote(AT_ONCE)} {n} {shlex.quote(body(model))}", wait=0, pty=False)


def answers_of(done):
    assert done["status"] == "done" and done["exit_code"] == 0, done
    return [json.loads(line) for line in "".join(c["data"] for c in done["output"] if c["type"] == "stdout").splitlines()]


def test_twenty_requests_at_once_never_spend_more_than_the_budget(user, fake):
    before = len(fake.requests)
    p = send_at_once(user, 20, "held")
    # Every request that got through is held open at the fake; the rest were answered at the
    # gateway. Wait until the fake has stopped getting new ones, then let them all finish.
    fake.wait_for(lambda r: r.model == "held", timeout=30)
    seen, still = -1, time.monotonic()
    while time.monotonic() - still < 2:
        if len(fake.requests) != seen:
            seen, still = len(fake.requests), time.monotonic()
        time.sleep(0.1)
    fake.release()
    answers = answers_of(wait_done(user, p["id"], timeout=90))
    assert len(answers) == 20
    passed = [a for a in answers if a["status"] == 200]
    refused = [a for a in answers if a["status"] != 200]
    arrived = [r for r in fake.requests[before:] if r.model == "held"]

    # What fits: worst cases reserved side by side within the budget.
    assert len(passed) == BUDGET // worst_case("held") == 4, [a["status"] for a in answers]
    assert len(arrived) == len(passed)  # the refused never reached the upstream
    assert all(a["status"] == 429 for a in refused), refused
    for a in refused:
        message = json.loads(a["body"])["error"]["message"]
        assert f"daily token budget of {BUDGET} tokens" in message and "left" in message, message
        assert f"up to {worst_case('held')} tokens" in message, message
    # /usage and the upstream agree, and both are within the budget.
    t = tokens_today(user)
    spent = len(arrived) * USED
    assert t["today"]["total_tokens"] == spent <= BUDGET, t
    assert t["today"]["requests"] == len(passed)
    assert t["remaining_today"] == BUDGET - spent


def test_control_sequential_requests_pass_until_the_worst_case_no_longer_fits(user, fake):
    before = len(fake.requests)
    fits = 0
    while fits * USED + worst_case("plain") <= BUDGET:
        answers = answers_of(wait_done(user, send_at_once(user, 1, "plain")["id"], timeout=60))
        assert answers[0]["status"] == 200, answers
        fits += 1
    assert fits == 7  # 7 x 1,150 spent: what is left (1,950) is less than one worst case
    answers = answers_of(wait_done(user, send_at_once(user, 1, "plain")["id"], timeout=60))
    assert answers[0]["status"] == 429
    message = json.loads(answers[0]["body"])["error"]["message"]
    assert f"{BUDGET - fits * USED} left" in message, message
    assert len([r for r in fake.requests[before:] if r.model == "plain"]) == fits
    t = tokens_today(user)
    assert t["today"]["total_tokens"] == fits * USED and t["today"]["requests"] == fits


# Runs in the box: one request with the body given on stdin ("@FILL@" in it replaced by N
# bytes of "x"), with its length or chunked; prints {"status": ..., "body": ...}.
ONE = r'''
import json, subprocess, sys
body = sys.stdin.buffer.read().replace(b"@FILL@", b"x" * int(sys.argv[2]))
extra = ["-H", "transfer-encoding: chunked"] if sys.argv[1] == "chunked" else []
out = subprocess.run(["curl", "-sS", "--max-time", "60", "-w", "\n%{http_code}", *extra,
                      "http://127.0.0.1:3129/v1/messages", "-H", "content-type: application/json",
                      "--data-binary", "@-"], input=body, capture_output=True)
answer, _, status = out.stdout.decode().rpartition("\n")
print(json.dumps({"status": int(status or 0), "body": answer, "err": out.stderr.decode()}))
'''


def send_one(client, body_text, framing="length", fill=0):
    code, out, err = sh(client, f"printf %s {shlex.quote(body_text)} | python3 -c {shlex.quote(ONE)} {framing} {fill}")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_a_body_larger_than_the_gateway_holds_for_the_check_is_413_naming_the_limit(user, fake, framing):
    before = len(fake.requests)
    body_text = json.dumps({"model": "plain", "max_tokens": 1, "messages": [{"role": "user", "content": "@FILL@"}]})
    answer = send_one(user, body_text, framing, fill=100 << 10)
    assert answer["status"] == 413, answer
    message = json.loads(answer["body"])["error"]["message"]
    assert "[inference] request_memory" in message and str(REQUEST_MEMORY) in message, message
    # Control: a body the limit holds gets as far as the budget, which it does not fit.
    answer = send_one(user, body_text, framing, fill=60 << 10)
    assert answer["status"] == 429 and "daily token budget" in answer["body"], answer
    assert len(fake.requests) == before


def test_a_max_tokens_the_budget_cannot_read_is_400_and_goes_nowhere(user, fake):
    before = len(fake.requests)
    for text_, why in [(json.dumps({"model": "plain", "messages": []}), "no top-level max_tokens"),
                       ('{"model":"plain","max_tokens":1,"max_tokens":100000,"messages":[]}', "twice"),
                       ('{"model":"plain","max_tokens":1e5,"messages":[]}', "whole number"),
                       ('{"model":"plain","max_tokens":1,', "not valid JSON")]:
        answer = send_one(user, text_)
        assert answer["status"] == 400 and why in json.loads(answer["body"])["error"]["message"], (text_, answer)
    assert len(fake.requests) == before
    # Control: the same request, well formed, is forwarded.
    answer = send_one(user, json.dumps({"model": "plain", "max_tokens": 1, "messages": []}))
    assert answer["status"] == 200, answer
    assert len(fake.requests) == before + 1
