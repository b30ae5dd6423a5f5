"""The JSON-lines side of the coordinator interop peers (coordinator.py,
engine.py): events to stdout, commands from stdin."""
import json
import os


def emit(**kw):
    print(json.dumps(kw), flush=True)


class Lines:
    """Reads stdin lines without Python's buffering, so the fd the poller
    watches stays readable while unread lines remain."""

    def __init__(self):
        self.buf = b""

    def read(self):
        data = os.read(0, 65536)
        if not data:
            return None
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        return [json.loads(l) for l in lines if l.strip()]
