"""A libzmq (pyzmq) PUSH with ZMTP heartbeats every 5 ms, sending engine-output
shaped multipart messages: a small body and aux frames of 300 B, 100 KiB and 1 MiB
(vLLM sends tensors of 256 B or more as aux frames). libzmq writes a heartbeat PING
whenever its timer fires, also between the frames of a message it is writing.

usage: py_push.py ENDPOINT COUNT

Message i is [b"head" + i (4 bytes, big endian), aux...] with aux frame j filled
with byte (i + j) & 0xff. After COUNT messages it sends b"END", waits for a line on
stdin (the receiver got END: libzmq's LINGER does not reliably flush at close), and
prints the number of DISCONNECTED events its socket saw (0 when every PING was
answered).
"""
import struct
import sys
import time

import zmq
from zmq.utils.monitor import recv_monitor_message

endpoint, count = sys.argv[1], int(sys.argv[2])
ctx = zmq.Context()
p = ctx.socket(zmq.PUSH)
p.setsockopt(zmq.HEARTBEAT_IVL, 5)
# Generous: a PULL that stops reading (its queue full) does not answer either, and a
# race-instrumented reader on a busy machine can fall seconds behind. A PING the
# reader refuses drops the connection at once, which is what this checks.
p.setsockopt(zmq.HEARTBEAT_TIMEOUT, 30000)
p.setsockopt(zmq.LINGER, 5000)
mon = p.get_monitor_socket(zmq.EVENT_DISCONNECTED)
p.connect(endpoint)
sizes = [300, 100 << 10, 1 << 20]
for i in range(count):
    aux = [bytes([(i + j) & 0xff]) * n for j, n in enumerate(sizes)]
    p.send_multipart([b"head" + struct.pack(">I", i)] + aux, copy=False)
    if i % 8 == 0:
        time.sleep(0.003)  # let heartbeat timers fire mid-stream
p.send(b"END")
sys.stdin.readline()
disconnects = 0
while mon.poll(50):
    recv_monitor_message(mon)
    disconnects += 1
print(disconnects, flush=True)
mon.close()
p.close()
ctx.term()
