"""Stands in for vLLM's ZmqEventPublisher (vllm/distributed/kv_events.py), for the
kvsub interop tests.

usage: publisher.py --fixture FILE --endpoint EP [--replay-endpoint EP] [--rank R]
                    [--buffer-steps N] [--hwm N] [--topic T]

As vLLM's publisher does: the endpoints are offset by the data-parallel rank (tcp:
port + rank; inproc: "_dp<rank>"), the PUB binds an endpoint with "*", "::", ipc://
or inproc:// and connects to any other, the replay ROUTER always binds, every
message is [topic, seq 8 B big-endian from 0, payload], the last buffer_steps
messages are kept for replay, a replay request [id, b"", start] is answered with
[id, b"", seq, payload] for every buffered seq >= start and then
[id, b"", -1 as 8 signed bytes, b""], and a pending replay request is served between
two messages. The payload is a KVEventBatch laid out as FILE (one release's golden
fixture: array_like and the field lists) says.

Hashes in commands are ints, or strings of hex digits for bytes hashes
(VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0). An extra_keys entry is a list (a tuple in
vLLM) or null.

stdin, one JSON object a line; every command is answered by exactly one event:
  {"cmd": "publish", "ts": F, "events": [EV...], "dp_rank": R|null, "count": N,
   "ts_step": S}
      publish the batch N times (default 1), the i-th with ts F + i*S (S default 0);
      dp_rank absent = the publisher's rank, as vLLM's publish() fills it in
      -> {"event": "published", "first": SEQ, "last": SEQ}
  {"cmd": "encode", same fields as publish} -> {"event": "encoded", "payload_hex": H}
  {"cmd": "publish_case", "case": NAME}: the fixture case's payload_hex verbatim
      -> published
  {"cmd": "publish_raw", "hex": H} or {"cmd": "publish_raw", "size": N}: that
      payload (N zero bytes) -> published
  {"cmd": "skip", "n": N}: the next N messages go into the replay buffer but not out
      on the PUB (a message the PUB dropped) -> {"event": "skipping", "n": N}
  {"cmd": "drop_oldest", "n": N} or {"cmd": "drop_oldest", "through": SEQ}: forget
      the buffer's oldest entries (a gap no replay can cover)
      -> {"event": "dropped", "oldest": SEQ|null}
  {"cmd": "replay_mode", "mode": "normal"|"silent"|"slow", "delay": S}: silent reads
      replay requests and answers none; slow sleeps S seconds before each answer
      -> {"event": "replay_mode", "mode": M}
  {"cmd": "stats"} -> {"event": "stats", "next_seq": N, "replays": [START...],
      "buffered": [FIRST, LAST]|null}
  {"cmd": "restart"}: close both sockets, bind (or connect) them again at the same
      addresses, seq back to 0, buffer empty, as a restarted engine
      -> {"event": "restarted", ...the fields of bound}
  {"cmd": "exit"}
stdout at start: {"event": "bound", "endpoint": EP, "replay": EP|null, "bind": B}
  (a bound endpoint as resolved, wildcard port included; a connect endpoint as given)
  or {"event": "error", "msg": M} and exit 1.
"""
import argparse
import json
import os
import sys
import time
from collections import deque

import msgpack
import zmq

END_SEQ = (-1).to_bytes(8, "big", signed=True)

# The newest (map-encoded) classes give these fields a default of None, so
# omit_defaults leaves them out when None; every other field is always written.
# The array releases write every field of their list.
MAP_DEFAULTED = {"extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window"}


def emit(**kw):
    print(json.dumps(kw), flush=True)


def offset_endpoint_port(endpoint, rank):
    """vLLM's rule: tcp gets port + rank, inproc gets _dp<rank>, others fail."""
    if not endpoint or rank == 0:
        return endpoint
    if "inproc" in endpoint:
        return f"{endpoint}_dp{rank}"
    if "tcp" in endpoint:
        i = endpoint.rfind(":")
        return f"{endpoint[:i]}:{int(endpoint[i + 1:]) + rank}"
    raise ValueError("Invalid endpoint: must contain 'inproc' or 'tcp'")


def binds(endpoint):
    """vLLM's heuristic: bind a wildcard, ipc or inproc endpoint, connect otherwise."""
    return ("*" in endpoint or "::" in endpoint or endpoint.startswith("ipc://")
            or endpoint.startswith("inproc://"))


def block_hash(h):
    return bytes.fromhex(h) if isinstance(h, str) else h


class Encoder:
    def __init__(self, fixture):
        self.array_like = fixture["array_like"]
        self.fields = {
            "BlockStored": fixture["block_stored_fields"],
            "BlockRemoved": fixture["block_removed_fields"],
            "AllBlocksCleared": [],
        }

    def event(self, ev):
        tag = ev["type"]
        values = []
        for f in self.fields[tag]:
            v = ev.get(f)
            if f == "block_hashes":
                v = [block_hash(h) for h in v]
            elif f == "parent_block_hash" and v is not None:
                v = block_hash(v)
            elif f == "extra_keys" and v is not None:
                v = [None if k is None else list(k) for k in v]
            values.append((f, v))
        if self.array_like:
            return [tag] + [v for _, v in values]
        m = {"type": tag}
        for f, v in values:
            if v is None and f in MAP_DEFAULTED:
                continue
            m[f] = v
        return m

    def batch(self, ts, events, dp_rank):
        evs = [self.event(e) for e in events]
        if self.array_like:
            obj = [float(ts), evs, dp_rank]
        else:
            obj = {"ts": float(ts), "events": evs}
            if dp_rank is not None:
                obj["data_parallel_rank"] = dp_rank
        return msgpack.packb(obj, use_bin_type=True)


class Publisher:
    def __init__(self, args, fixture):
        self.ctx = zmq.Context()
        self.rank = args.rank
        self.topic = args.topic.encode("utf-8")
        self.hwm = args.hwm
        self.buffer = deque(maxlen=args.buffer_steps)
        self.encoder = Encoder(fixture)
        self.cases = {c["name"]: bytes.fromhex(c["payload_hex"]) for c in fixture["cases"]}
        self.endpoint = offset_endpoint_port(args.endpoint, args.rank)
        self.replay_endpoint = offset_endpoint_port(args.replay_endpoint or None, args.rank)
        self.bind = binds(self.endpoint)
        self.silent = False
        self.delay = 0.0
        self.replays = []
        self.pub = self.replay = None
        self.setup()

    def setup(self):
        self.seq = 0
        self.skip = 0
        self.buffer.clear()
        self.pub = self.ctx.socket(zmq.PUB)
        self.pub.set_hwm(self.hwm)
        if self.bind:
            rebind(self.pub, self.endpoint)
            # A restart binds the same port again, even a wildcard one.
            self.endpoint = self.pub.getsockopt(zmq.LAST_ENDPOINT).decode()
        else:
            self.pub.connect(self.endpoint)
        if self.replay_endpoint is not None:
            self.replay = self.ctx.socket(zmq.ROUTER)
            rebind(self.replay, self.replay_endpoint)
            self.replay_endpoint = self.replay.getsockopt(zmq.LAST_ENDPOINT).decode()

    def close(self):
        self.pub.close(linger=0)
        if self.replay is not None:
            self.replay.close(linger=0)
        self.pub = self.replay = None

    def addresses(self):
        return {"endpoint": self.endpoint, "replay": self.replay_endpoint, "bind": self.bind}

    def send(self, payload):
        """One message, as vLLM's publisher thread sends it: a pending replay
        request first, then the PUB, then the buffer."""
        self.service_replay()
        seq = self.seq
        self.seq += 1
        if self.skip > 0:
            self.skip -= 1
        else:
            self.pub.send_multipart((self.topic, seq.to_bytes(8, "big"), payload))
        self.buffer.append((seq, payload))
        return seq

    def service_replay(self):
        while self.replay is not None and self.replay.poll(0):
            frames = self.replay.recv_multipart()
            if len(frames) != 3:
                continue
            client, _, start = frames
            start = int.from_bytes(start, "big")
            self.replays.append(start)
            if self.silent:
                continue
            for seq, payload in self.buffer:
                if seq >= start:
                    time.sleep(self.delay)
                    self.replay.send_multipart((client, b"", seq.to_bytes(8, "big"), payload))
            self.replay.send_multipart((client, b"", END_SEQ, b""))

    def command(self, cmd):
        c = cmd["cmd"]
        if c in ("publish", "encode"):
            dp_rank = cmd["dp_rank"] if "dp_rank" in cmd else self.rank
            payload = self.encoder.batch(cmd["ts"], cmd["events"], dp_rank)
            if c == "encode":
                return emit(event="encoded", payload_hex=payload.hex())
            seqs = []
            for i in range(cmd.get("count", 1)):
                if i > 0 and cmd.get("ts_step"):
                    payload = self.encoder.batch(cmd["ts"] + i * cmd["ts_step"], cmd["events"], dp_rank)
                seqs.append(self.send(payload))
            return emit(event="published", first=seqs[0], last=seqs[-1])
        if c == "publish_case":
            seq = self.send(self.cases[cmd["case"]])
            return emit(event="published", first=seq, last=seq)
        if c == "publish_raw":
            payload = bytes.fromhex(cmd["hex"]) if "hex" in cmd else bytes(cmd["size"])
            seq = self.send(payload)
            return emit(event="published", first=seq, last=seq)
        if c == "skip":
            self.skip += cmd["n"]
            return emit(event="skipping", n=cmd["n"])
        if c == "drop_oldest":
            if "through" in cmd:
                while self.buffer and self.buffer[0][0] <= cmd["through"]:
                    self.buffer.popleft()
            else:
                for _ in range(min(cmd["n"], len(self.buffer))):
                    self.buffer.popleft()
            return emit(event="dropped", oldest=self.buffer[0][0] if self.buffer else None)
        if c == "replay_mode":
            self.silent = cmd["mode"] == "silent"
            self.delay = cmd.get("delay", 0.0) if cmd["mode"] == "slow" else 0.0
            return emit(event="replay_mode", mode=cmd["mode"])
        if c == "stats":
            self.service_replay()
            buffered = [self.buffer[0][0], self.buffer[-1][0]] if self.buffer else None
            return emit(event="stats", next_seq=self.seq, replays=self.replays, buffered=buffered)
        if c == "restart":
            self.close()
            self.setup()
            return emit(event="restarted", **self.addresses())
        return emit(event="error", msg=f"unknown command {c!r}")


def rebind(sock, endpoint):
    """Binds endpoint, retrying while the address is still held: libzmq closes a
    socket's listener in its I/O thread, after close() has returned."""
    deadline = time.monotonic() + 10
    while True:
        try:
            sock.bind(endpoint)
            return
        except zmq.ZMQError as e:
            if e.errno != zmq.EADDRINUSE or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


class Lines:
    """stdin lines read without Python's buffering, so the fd the poller watches
    stays readable while unread lines remain."""

    def __init__(self):
        self.buf = b""

    def read(self):
        data = os.read(0, 1 << 16)
        if not data:
            return None
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        return [json.loads(l) for l in lines if l.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--replay-endpoint", default="")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--buffer-steps", type=int, default=10_000)
    ap.add_argument("--hwm", type=int, default=100_000)
    ap.add_argument("--topic", default="")
    args = ap.parse_args()
    with open(args.fixture) as f:
        fixture = json.load(f)
    try:
        pub = Publisher(args, fixture)
    except (zmq.ZMQError, ValueError) as e:
        emit(event="error", msg=str(e))
        sys.exit(1)
    emit(event="bound", **pub.addresses())
    stdin = Lines()
    while True:
        poller = zmq.Poller()
        poller.register(0, zmq.POLLIN)
        if pub.replay is not None:
            poller.register(pub.replay, zmq.POLLIN)
        ready = dict(poller.poll())
        if pub.replay is not None and pub.replay in ready:
            pub.service_replay()
        if 0 not in ready:
            continue
        cmds = stdin.read()
        if cmds is None:
            break
        for cmd in cmds:
            if cmd["cmd"] == "exit":
                leave(pub)
            pub.command(cmd)
    leave(pub)


def leave(pub):
    """Closes the sockets and exits without zmq_ctx_term: with every socket
    closed at linger 0 there is nothing left to flush. A publisher whose PUB
    had reconnected to a bound SUB once did not exit within 30 s of "exit" in
    CI, and term is the only call after it that can wait; the tests only need
    the process gone."""
    pub.close()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
