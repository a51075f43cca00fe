"""Sends messages to an Onramp server with Segment's own analytics-python,
as a server-side app would. Prints one JSON line: the library's version and
the errors it reported (none expected).

person (the default): a person's messages, anonymous first, then an alias
to their user id, a group call naming their company, and a rename (an alias
from the user id to a new one).

companies: two companies of ops, each set up by its creator (screens, an
alias to the creator's user id, a group call with the company's traits);
an employee joins the first (an identify, a group call, then the
employee's welcome), nobody the second.

usage: segment_python.py HOST WRITE_KEY PREFIX [person|companies]
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


def person():
    client.screen(anonymous_id=device, name="welcome", timestamp=at(0))
    client.track(anonymous_id=device, event="sign_up_started", timestamp=at(1))
    client.alias(previous_id=device, user_id=user, timestamp=at(2))
    client.track(user_id=user, event="otp_verified", timestamp=at(3))
    client.group(user_id=user, group_id=company, traits={"name": "Acme", "employees": 12}, timestamp=at(4))
    client.alias(previous_id=user, user_id=renamed, timestamp=at(5))
    client.track(user_id=renamed, event="profile_created", timestamp=at(6))


def companies():
    creator = {"flow": "company_creator"}
    for n, name in [(1, "Acme"), (2, "Globex")]:
        founder, founder_device, company_id = f"{prefix}-founder-{n}", f"{prefix}-founder-device-{n}", f"{prefix}-co-{n}"
        for minute, screen in enumerate(["welcome", "signup", "credentials", "profile", "companySetup"]):
            client.screen(anonymous_id=founder_device, name=screen, properties=creator, timestamp=at(minute))
        client.alias(previous_id=founder_device, user_id=founder, timestamp=at(5))
        client.screen(user_id=founder, name="companyDetails", properties=creator, timestamp=at(6))
        client.group(user_id=founder, group_id=company_id, traits={"name": name, "size": "11-50"}, timestamp=at(7))
        client.screen(user_id=founder, name="companyCode", properties=creator, timestamp=at(8))
    employee, employee_device = f"{prefix}-employee-1", f"{prefix}-employee-device-1"
    client.identify(anonymous_id=employee_device, user_id=employee, timestamp=at(30))
    client.group(user_id=employee, group_id=f"{prefix}-co-1", timestamp=at(31))
    client.screen(anonymous_id=employee_device, name="welcome", properties={"flow": "employee"}, timestamp=at(32))


companies() if len(sys.argv) > 4 and sys.argv[4] == "companies" else person()
client.flush()
client.shutdown()
print(json.dumps({"version": VERSION, "errors": errors}))
