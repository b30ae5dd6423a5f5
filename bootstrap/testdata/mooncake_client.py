#!/usr/bin/env python3
"""Plays the calls vLLM's MooncakeConnector makes against a bootstrap registry.

Usage: mooncake_client.py BASE_URL   (e.g. http://127.0.0.1:8998)

Prefill side (mooncake_connector.py, newest version): every producer worker
binds a ZeroMQ ROUTER to a random port, then POSTs
{engine_id, dp_rank, tp_rank, pp_rank, addr} to <base>/register with up to 3
attempts, a 30 s timeout, backoff 1 s doubling (cap 10 s), retrying only on
connection errors and timeouts; any HTTP error status is fatal. Plain TCP
listeners stand in for the ROUTER sockets: the registry only connects to them.

Decode side: GET <remote_bootstrap_addr>/query with a 5 s timeout and no
retry, caching for every entry engine_id -> {int(tp): {int(pp): addr}} and
tp_size = len(worker_addr). Proxies read int(dp) keys.

Prints OK and exits 0 when every check holds; otherwise exits 1.
"""

import socket
import sys
import time
import uuid

import requests

MAX_ATTEMPTS = 3
TIMEOUT = 30.0


class RegistrationError(Exception):
    pass


def register_worker(base, payload, attempts_log):
    """vLLM's registration loop: retry only transport failures."""
    url = f"{base}/register"
    backoff = 1.0
    for attempt in range(1, MAX_ATTEMPTS + 1):
        attempts_log.append(payload)
        try:
            resp = requests.post(url, json=payload, timeout=TIMEOUT)
        except (requests.ConnectionError, requests.Timeout) as e:
            if attempt == MAX_ATTEMPTS:
                raise RegistrationError(
                    f"Failed to register {payload} with the Mooncake bootstrap "
                    f"server at {url} after {MAX_ATTEMPTS} attempts.") from e
            time.sleep(backoff)
            backoff = min(backoff * 2, 10.0)
            continue
        if resp.status_code >= 400:
            # vLLM logs the body and raises; it never retries an HTTP error.
            raise RegistrationError(
                f"Error registering {payload} with bootstrap server: {resp.text}",
                resp)
        return resp


def query(base):
    """vLLM's decode-side lookup; returns (engine_id -> addrs, tp sizes, dp keys)."""
    resp = requests.get(f"{base}/query", timeout=5.0)
    resp.raise_for_status()
    data = resp.json()
    remote_agents, tp_size, dp_of = {}, {}, {}
    for dp_key, entry in data.items():
        engine_id = entry["engine_id"]
        worker_addr = {
            int(tp): {int(pp): addr for pp, addr in pp_map.items()}
            for tp, pp_map in entry["worker_addr"].items()
        }
        remote_agents[engine_id] = worker_addr
        tp_size[engine_id] = len(worker_addr)
        dp_of[engine_id] = int(dp_key)  # what the example proxy does
    return remote_agents, tp_size, dp_of


class Deployment:
    """A prefill deployment: DP engines x TP workers, each with a listener."""

    def __init__(self, dps, tp, pin=None):
        prefix = pin or str(uuid.uuid4())
        self.engines = {dp: f"{prefix}_dp{dp}" for dp in dps}
        self.tp = tp
        self.socks = {}
        for dp in dps:
            for rank in range(tp):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.bind(("127.0.0.1", 0))
                s.listen(16)
                self.socks[(dp, rank)] = s

    def addr(self, dp, rank):
        return "tcp://127.0.0.1:%d" % self.socks[(dp, rank)].getsockname()[1]

    def payloads(self):
        for (dp, rank) in sorted(self.socks):
            yield {"engine_id": self.engines[dp], "dp_rank": dp,
                   "tp_rank": rank, "pp_rank": 0, "addr": self.addr(dp, rank)}

    def start(self, base, log):
        for p in self.payloads():
            register_worker(base, p, log)

    def kill(self):
        for s in self.socks.values():
            s.close()


def check(cond, msg):
    if not cond:
        print("FAIL:", msg)
        sys.exit(1)


def main():
    base = sys.argv[1].rstrip("/")

    # 1. A fresh deployment (2 DP engines, TP=2) registers and is found.
    log = []
    first = Deployment([0, 1], tp=2)
    first.start(base, log)
    check(len(log) == 4, f"4 registrations, one attempt each: {len(log)}")
    agents, tp_size, dp_of = query(base)
    for dp, eid in first.engines.items():
        check(eid in agents, f"{eid} not in /query")
        check(tp_size[eid] == 2, f"tp size of {eid} = {tp_size[eid]}")
        check(dp_of[eid] == dp, f"dp of {eid} = {dp_of[eid]}")
        check(agents[eid][1][0] == first.addr(dp, 1), f"addr of {eid}")

    # 2. A retry of a committed registration (after a read timeout) is OK.
    p = next(first.payloads())
    resp = register_worker(base, p, log)
    check(resp.status_code == 200 and resp.json() == {"status": "ok"},
          f"idempotent retry: {resp.status_code} {resp.text}")

    # 3. The prefill is killed and restarted with new engine ids and ports:
    #    vLLM's own registry would answer 400 and abort; this one takes over.
    first.kill()
    second = Deployment([0, 1], tp=2)
    log.clear()
    try:
        second.start(base, log)
    except RegistrationError as e:
        check(False, f"restart refused: {e}")
    agents, tp_size, _ = query(base)
    check(set(agents) == set(second.engines.values()),
          f"after restart /query has {sorted(agents)}")

    # 4. A second live deployment pointed at the same registry is refused with
    #    vLLM's exact message, on the first attempt, and not retried.
    third = Deployment([0], tp=1)
    log.clear()
    try:
        third.start(base, log)
        check(False, "a live collision was accepted")
    except RegistrationError as e:
        resp = e.args[1]
        want = (f"Engine ID mismatch for dp_rank=0: expected "
                f"{second.engines[0]}, got {third.engines[0]}")
        check(resp.status_code == 400, f"status {resp.status_code}")
        check(resp.json()["detail"] == want, f"detail {resp.json()['detail']!r}")
        check("hint" in resp.json(), "no hint beside detail")
        check(len(log) == 1, f"HTTP 400 retried: {len(log)} attempts")

    # 5. A pinned engine id restarted on new ports replaces its dead worker;
    #    the same id at a new address while the old one is alive is refused.
    pinned = Deployment([5], tp=1, pin="pinned")
    pinned.start(base, log)
    again = Deployment([5], tp=1, pin="pinned")
    try:
        again.start(base, log)
        check(False, "live pinned duplicate accepted")
    except RegistrationError as e:
        want = ("Worker with dp_rank=5, tp_rank=0, pp_rank=0 is already "
                f"registered at {pinned.addr(5, 0)}, but still want to "
                f"register at {again.addr(5, 0)}")
        check(e.args[1].json()["detail"] == want, f"detail {e.args[1].text}")
    pinned.kill()
    again.start(base, log)
    agents, _, _ = query(base)
    check(agents["pinned_dp5"][0][0] == again.addr(5, 0), "pinned takeover")

    # 6. A newer client sends tp_size and extra fields: an engine with only
    #    tp 0 of 2 is hidden, so no decode caches TP=1 for it.
    half = Deployment([7], tp=1)
    p = next(half.payloads())
    p.update({"tp_size": 2, "pp_size": 1, "pcp_rank": 0, "pcp_size": 1, "dcp_size": 1})
    register_worker(base, p, log)
    agents, _, _ = query(base)
    check(half.engines[7] not in agents, "incomplete engine published")

    # 7. Malformed bodies get FastAPI's 422 shape.
    r = requests.post(f"{base}/register", json={"engine_id": "x"}, timeout=5)
    check(r.status_code == 422 and r.json()["detail"][0]["type"] == "missing",
          f"422: {r.status_code} {r.text}")

    # 8. A base URL with a trailing slash ("//query") still works.
    r = requests.get(f"{base}//query", timeout=5)
    check(r.status_code == 200 and set(r.json()) == {"0", "1", "5"},
          f"//query: {r.status_code} {r.text}")

    for d in (second, third, again, half):
        d.kill()
    print("OK")


if __name__ == "__main__":
    main()
