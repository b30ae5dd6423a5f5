"""A switchyard client-protocol client written the way a vLLM-minded user would:
pyzmq DEALER, msgpack bodies shaped like vLLM's msgspec structs.

Usage: client.py ENDPOINT. Runs the scenarios below and prints one JSON object with
what it saw; the Go test checks it. Every receive has a timeout so a broken server
fails the test instead of hanging it.
"""

import json
import sys
import time

import msgpack
import zmq

ADD, ABORT, UTILITY = b"\x00", b"\x01", b"\x03"
FINISH_LENGTH, FINISH_ABORT = 1, 2


def request(req_id, prompt, max_tokens, rank=None):
    # EngineCoreRequest, array_like: request_id, prompt_token_ids, mm_features,
    # sampling_params (a map, as msgspec encodes SamplingParams), pooling_params,
    # arrival_time, lora_request, cache_salt, data_parallel_rank.
    sampling = {"max_tokens": max_tokens, "ignore_eos": True}
    return msgpack.packb([req_id, prompt, None, sampling, None, time.time(), None, None, rank])


def recv(sock, timeout_ms=5000):
    if not sock.poll(timeout_ms):
        raise TimeoutError("no message from switchyard")
    frames = sock.recv_multipart()
    msg = msgpack.unpackb(frames[0], raw=False, strict_map_key=False)
    # EngineCoreOutputs is an array, an error message is a map.
    return ("error", msg) if isinstance(msg, dict) else ("outputs", msg)


def collect(sock, req_id):
    """Reads EngineCoreOutputs until req_id finishes; returns tokens and reason."""
    tokens, ranks = [], set()
    while True:
        kind, msg = recv(sock)
        if kind == "error":
            raise RuntimeError("unexpected error message: %r" % (msg,))
        engine_index, outputs = msg[0], msg[1]
        for out in outputs:
            if out[0] != req_id:
                raise RuntimeError("output for another request: %r" % (out[0],))
            tokens.extend(out[1])
            ranks.add(engine_index)
            finish = out[5] if len(out) > 5 else None
            if finish is not None:
                return tokens, finish, sorted(ranks)


def main():
    endpoint = sys.argv[1]
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
    result = {}

    # 1. Two requests at once, outputs interleave; each ends with finish_reason LENGTH.
    sock.send_multipart([ADD, request("py-1", [1, 2, 3], 6)])
    sock.send_multipart([ADD, request("py-2", [4, 5], 3)])
    seen = {"py-1": [], "py-2": []}
    finished = {}
    while len(finished) < 2:
        kind, msg = recv(sock)
        assert kind == "outputs", msg
        for out in msg[1]:
            seen[out[0]].extend(out[1])
            if len(out) > 5 and out[5] is not None:
                finished[out[0]] = out[5]
    result["tokens"] = {k: len(v) for k, v in seen.items()}
    result["finish"] = finished

    # 2. A request pinned to a rank that is not connected is refused by name.
    sock.send_multipart([ADD, request("py-bad", [1], 4, rank=7)])
    kind, msg = recv(sock)
    result["rejected"] = msg if kind == "error" else None

    # 3. ABORT ends a live request; switchyard confirms with a final ABORT output.
    sock.send_multipart([ADD, request("py-long", [1], 100000)])
    kind, msg = recv(sock)
    assert kind == "outputs" and msg[1][0][0] == "py-long", msg
    sock.send_multipart([ABORT, msgpack.packb(["py-long"])])
    while True:
        kind, msg = recv(sock)
        outs = [o for o in msg[1] if len(o) > 5 and o[5] is not None]
        if outs:
            result["aborted"] = outs[0][5]
            break

    # 4. UTILITY: [client_index, call_id, method, args] -> utility_output.
    sock.send_multipart([UTILITY, msgpack.packb([0, 77, "is_sleeping", []])])
    kind, msg = recv(sock)
    util = msg[4] if kind == "outputs" and len(msg) > 4 else None
    result["utility"] = {"call_id": util[0], "failure": util[1]} if util else msg

    # 5. A client that disappears: a second DEALER starts a long request and closes.
    gone = ctx.socket(zmq.DEALER)
    gone.setsockopt(zmq.LINGER, 0)
    gone.connect(endpoint)
    gone.send_multipart([ADD, request("py-gone", [1], 100000)])
    kind, msg = recv(gone)
    result["gone_started"] = kind == "outputs"
    gone.close()

    sock.close()
    ctx.term()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
