"""Sends a person's messages to an Onramp server with Segment's own
analytics-python, as a server-side app would: anonymous first, then an
alias to their user id, a group call naming their company, and a rename
(an alias from the user id to a new one). Prints one JSON line: the
library's version and the errors it reported (none expected).

usage: segment_python.py HOST WRITE_KEY PREFIX
"""
import json
import sys
from datetime import datetime, timedelta, timezone

from segment.analytics import Client, VERSION

host, write_key, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
errors = []
# As apps run it: messages queued, sent in batches by its consumer thread.
client = Client(write_key=write_key, host=host, max_retries=2,
                on_error=lambda error, batch: errors.append(str(error)))
device, user, renamed, company = f"{prefix}-device", f"{prefix}-user", f"{prefix}-renamed", f"{prefix}-company"
start = datetime.now(timezone.utc) - timedelta(hours=2)


def at(minutes):
    return start + timedelta(minutes=minutes)


client.screen(anonymous_id=device, name="welcome", timestamp=at(0))
client.track(anonymous_id=device, event="sign_up_started", timestamp=at(1))
client.alias(previous_id=device, user_id=user, timestamp=at(2))
client.track(user_id=user, event="otp_verified", timestamp=at(3))
client.group(user_id=user, group_id=company, traits={"name": "Acme", "employees": 12}, timestamp=at(4))
client.alias(previous_id=user, user_id=renamed, timestamp=at(5))
client.track(user_id=renamed, event="profile_created", timestamp=at(6))
client.flush()
client.shutdown()
print(json.dumps({"version": VERSION, "errors": errors}))
