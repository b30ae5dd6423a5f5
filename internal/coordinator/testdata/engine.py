"""A vLLM DP engine's coordinator side, for coordinator interop tests.

usage: engine.py COORDINATOR_INPUT COORDINATOR_OUTPUT RANK

Like vLLM's engine input thread it connects an XSUB to coordinator_input,
subscribes with the single frame 01 and blocks until the single frame READY;
its output thread connects a PUSH to coordinator_output. Messages are encoded
as msgspec would (array_like EngineCoreOutputs with trailing defaults
omitted, SchedulerStats as a map).

stdin: JSON commands, one per line:
  {"cmd": "stats", "waiting": W, "running": R, "kv": F}
  {"cmd": "start_wave", "wave": N}
  {"cmd": "wave_complete", "wave": N}
  {"cmd": "exit"}
stdout: JSON events, one per line:
  {"event": "ready"}
  {"event": "start_dp_wave", "wave": N, "exclude": R or null}
"""
import sys
import time

import msgpack
import zmq

from jsonlines_peer import Lines, emit


def main():
    coord_in, coord_out, rank = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.connect(coord_out)

    sub = ctx.socket(zmq.XSUB)
    sub.setsockopt(zmq.IDENTITY, rank.to_bytes(2, "little"))
    sub.connect(coord_in)
    sub.send(b"\x01")
    # vLLM's input thread blocks here until the coordinator says READY.
    while True:
        if sub.poll(10000) == 0:
            print("still waiting for coordinator READY", file=sys.stderr, flush=True)
            continue
        if sub.recv() == b"READY":
            break
    emit(event="ready")

    def outputs(stats=None, wave_complete=None, start_wave=None):
        fields = [rank, [], stats, time.monotonic(), None, None, wave_complete, start_wave]
        while fields[-1] is None:  # omit_defaults drops trailing defaults
            fields.pop()
        push.send(msgpack.packb(fields, use_bin_type=True))

    poller = zmq.Poller()
    poller.register(sub, zmq.POLLIN)
    poller.register(0, zmq.POLLIN)
    stdin = Lines()
    while True:
        for sock, _ in poller.poll():
            if sock is sub:
                frames = sub.recv_multipart()
                if frames == [b"READY"]:
                    continue  # late READY frames are ignored, as vLLM does
                if len(frames) == 2 and frames[0] == b"\x02":
                    wave, exclude = msgpack.unpackb(frames[1], raw=False)
                    emit(event="start_dp_wave", wave=wave, exclude=exclude)
                else:
                    emit(event="unexpected", frames=[f.hex() for f in frames])
                continue
            cmds = stdin.read()
            if cmds is None:
                return
            for cmd in cmds:
                if cmd["cmd"] == "stats":
                    outputs(stats={
                        "num_running_reqs": cmd["running"],
                        "num_waiting_reqs": cmd["waiting"],
                        "kv_cache_usage": float(cmd["kv"]),
                        "step_counter": 0,
                        "current_wave": 0,
                        "prefix_cache_stats": {"reset": False, "requests": 0, "queries": 0, "hits": 0},
                    })
                elif cmd["cmd"] == "start_wave":
                    outputs(start_wave=cmd["wave"])
                elif cmd["cmd"] == "wave_complete":
                    outputs(wave_complete=cmd["wave"])
                elif cmd["cmd"] == "exit":
                    sub.close(linger=0)
                    push.close(linger=1000)
                    ctx.term()
                    return

if __name__ == "__main__":
    main()
