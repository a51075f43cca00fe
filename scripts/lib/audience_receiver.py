"""A receiver of an audience's deliveries (docs/audiences.md, "Delivering"),
as a team's tool would run one: it checks each batch's Onramp-Signature
against the shared secret, refuses a stale or forged one, and drops the
changes whose delivery id it has already seen. The delivery test runs it,
and makes it misbehave on cue.

    python3 audience_receiver.py PORT LOG [ACTION ...]

PORT 0 takes a free one; the first line printed is `listening PORT`.
The secret is read from $ONRAMP_DELIVERY_SECRET. Each POST takes the next
ACTION (then `ok` for ever): `ok` answers 200, `500` answers 500,
`429:SECONDS` answers 429 with that Retry-After, `die` reads the batch and
exits before answering (the sender sees the connection drop). Every batch
read is appended to LOG as one JSON line: the signature's verdict and the
body, whatever the answer.
"""
import hashlib
import hmac
import json
import os
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

TOLERANCE_SECONDS = 300


def verify(header, body, secret):
    """Whether `header` (t=<unix seconds>,v1=<hex>) signs `body` with `secret`, and is recent."""
    parts = dict(item.split("=", 1) for item in header.split(",") if "=" in item)
    try:
        sent = int(parts["t"])
    except (KeyError, ValueError):
        return False
    expected = hmac.new(secret.encode(), f"{sent}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, parts.get("v1", "")) and abs(time.time() - sent) <= TOLERANCE_SECONDS


def main():
    port, log = int(sys.argv[1]), sys.argv[2]
    actions = list(sys.argv[3:])
    secret = os.environ["ONRAMP_DELIVERY_SECRET"]
    # A parent may start it with SIGTERM blocked: a receiver stops when told to.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            valid = verify(self.headers.get("Onramp-Signature", ""), body, secret)
            with open(log, "a") as out:
                out.write(json.dumps({"valid": valid, "body": json.loads(body)}) + "\n")
            action = actions.pop(0) if actions else "ok"
            if action == "die":
                os._exit(1)
            if not valid:
                self.send_response(401)
            elif action == "500":
                self.send_response(500)
            elif action.startswith("429"):
                self.send_response(429)
                self.send_header("Retry-After", action.split(":", 1)[1])
            else:
                self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", port), Handler)
    print("listening", server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
